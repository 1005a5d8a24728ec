"""Exceptions of elastic training (Horovod's names where Horovod has one)."""

from tfring import _errors as errors


def describe(exc):
    """``Type: line`` for a log message: tfring's own line of the message (a TF op error
    buries it under "Graph execution error:" and the node), else its first line."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    ours = [line for line in lines if line.startswith("tfring")]
    return f"{type(exc).__name__}: {(ours or lines or [''])[0]}"[:300]


class HostsUpdatedInterrupt(RuntimeError):
    """Raised by ``state.commit()`` / ``state.check_host_updates()`` on every rank at the same
    commit when the driver has published a new membership (a host added or removed). The
    ``run`` wrapper catches it, re-forms the job and syncs the state: user code never needs
    to. ``skip_sync`` is kept for Horovod compatibility and is always False (the state is
    always synced from the new rank 0)."""

    def __init__(self, skip_sync=False):
        super().__init__("the job's hosts were updated; re-forming the job")
        self.skip_sync = skip_sync


class JobEndedError(errors.AbortedError):
    """The elastic driver ended the job (too few workers left after ``--elastic-timeout``,
    ``--reset-limit`` reached) or this worker is no longer part of it: the message says
    which. Not recoverable."""


# Horovod's name for a collective that failed because the job lost a member; tfring raises
# the core's own errors (PeerLostError, tf.errors.UnavailableError, ...) and the ``run``
# wrapper recognises them by the runtime's health, so this alias exists for code that
# catches Horovod's name.
HorovodInternalError = errors.PeerLostError
