"""The elastic ``run`` wrapper: train, and when the job loses or gains a member, re-form
it and go on from the last commit (Horovod's ``hvd.elastic.run``).

    @run_fn(reset=...)                        # tf_state.run (hvd.elastic.run) binds reset
    def train(state): ...                     # called with the synced state

Loop: sync the state from rank 0, call the function. When it raises
- ``HostsUpdatedInterrupt`` (every rank, same commit): re-form the job, sync, call again;
- an error while this rank's runtime has lost the job (a dead or frozen peer, a peer that
  left: ``_core.check_health()`` names it): restore the last commit, re-form, sync, call
  again;
- anything else: raised as it is (a bug in the training function is not retried here; the
  driver sees the worker fail).
Outside an elastic job (no ``TFRING_ELASTIC_WORKER``) every error is raised as it is: a
non-elastic job keeps failing fast. How many times the job may re-form is the driver's
``--reset-limit``.
"""

import functools
import sys

from tfring import _core
from tfring import _errors as errors
from tfring._basics import basics
from tfring._elastic import worker
from tfring._elastic.exceptions import HostsUpdatedInterrupt, describe


def _say(text):
    print(f"tfring elastic: {text}", file=sys.stderr, flush=True)


def lost_job_member(exc):
    """True when ``exc`` happened because this rank's runtime lost the job (a peer died,
    froze or left), in an elastic worker; on rank 0 it also notes which ranks were lost, for
    the driver (``worker.note_lost``). Never blocks."""
    if worker.worker_id() is None or not basics.is_initialized():
        return False
    try:
        _core.check_health()
    except errors.TfringError as health:
        worker.note_lost(basics.rank(), str(health))
        return True
    return False


def reset(lost_member=False):
    """Leaves the current generation and joins the next one (blocking: until the driver
    publishes it, bounded by TFRING_ELASTIC_TIMEOUT_S). ``lost_member``: this generation
    lost a member; the driver is told, so it re-forms the job even when no process exited
    (a frozen remote peer, a cut network). A failed rendezvous is retried with the next
    generation (``worker.init_core``).

    Raises:
      JobEndedError: the driver ended the job, left this worker out, or published no new
        generation in time.
    """
    basics.shutdown()
    if lost_member:
        worker.report_broken()
    basics.reinit()


def run_fn(func, reset_fn=reset):
    """Wraps ``func(state, *args, **kwargs)`` in the elastic loop (module docstring)."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        reset_required = lost_member = False
        while True:
            if reset_required:
                reset_fn(lost_member=lost_member)
                _say(f"rank {basics.rank()} of {basics.size()} after the reset; syncing the state from rank 0")
                state.on_reset()
            try:
                state.sync()
                return func(state, *args, **kwargs)
            except HostsUpdatedInterrupt:
                _say("the driver published a new membership; re-forming the job at this commit")
                lost_member = False
            except Exception as e:
                if not lost_job_member(e):
                    raise
                _say(f"rank {basics.rank()} lost the job ({describe(e)}); restoring the last commit")
                state.restore()
                lost_member = True
            reset_required = True

    return wrapper
