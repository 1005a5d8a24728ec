"""Process basics: init/shutdown, this process's place in the job, configuration.

A script started without ``tfringrun`` finds its place from ``mpirun`` or ``srun`` when
they started it (``environment_discovery.py``), else runs as a single process of size 1
with no rendezvous.
"""

import atexit
import contextlib
import os
import sys
import warnings

from tfring import _core, _interrupts
from tfring._basics import auto_names, horovod_settings
from tfring._basics import process_sets as _process_sets
from tfring._bootstrap import launch_env, providers

_atexit_registered = False
_explicit_overrides = None


def init(process_sets=None, **settings):
    """Joins the job: rendezvous with every rank through the store, then starts the
    background thread. Blocking, bounded by TFRING_START_TIMEOUT_S.

    Args:
      process_sets: Horovod's ``init(process_sets=[ProcessSet([0, 2]), ...])``: sets to
        register, in order (ids 1..k), once the job is up; collective like
        ``add_process_set`` (``tfring._basics.process_sets``). ``"dynamic"`` is accepted and means
        nothing more (tfring always allows adding sets at run time).
      **settings: explicit settings that win over ``TFRING_*`` environment variables, by
        lower-case name without the prefix, e.g. ``init(fusion_threshold=1 << 20,
        cycle_time_ms=0.5)``. See ``config_table()``.

    Calling ``init()`` again while initialized is a no-op (Horovod semantics) when it asks
    for nothing new; asking for different settings raises ``PreconditionError``.

    Without TFRING_RANK (no tfringrun), the identity comes from ``mpirun`` / ``srun``
    variables and, with mpi4py, rank 0 serves the store and shares it through MPI: see
    ``tfring._basics.environment_discovery``. A worker of an elastic job (started by ``tfringrun
    --min-np/--max-np/--host-discovery-script``) gets its identity from the driver's next
    generation that includes it instead, waiting for it (docs/elastic.md).

    On the main thread, replaces Python's default SIGINT handler with tfring's
    (``tfring._interrupts``): Ctrl-C while a TensorFlow collective waits is one clean
    KeyboardInterrupt.

    Raises:
      tfring.errors.InvalidArgumentError: a setting has a bad value (the message names it).
      tfring.errors.PreconditionError: started by mpirun/srun with more than one rank but
        no store (no TFRING_STORE_ADDR/TFRING_SECRET and no mpi4py).
      tfring.errors.TimeoutError: not every rank arrived in time.
    """
    global _atexit_registered, _explicit_overrides
    overrides = {_env_name(k): _env_value(v) for k, v in settings.items()}
    if _core.is_initialized():
        if not overrides or overrides == _explicit_overrides:
            _register_process_sets(process_sets)
            return
        from tfring._errors import PreconditionError

        raise PreconditionError(
            "tfring is already initialized; call tfring.shutdown() before init() with new "
            f"settings. Received: {settings}"
        )
    if launch_env.elastic_worker_id() is not None and "TFRING_RANK" not in overrides:
        providers.get("elastic_join")(lambda found: _core.init({**found, **overrides}))
    else:
        _core.init({**_discovered(overrides), **overrides})
    _explicit_overrides = overrides
    _register_process_sets(process_sets)
    horovod_settings.warn_if_any()
    _interrupts.install()  # Ctrl-C in a blocked collective: one KeyboardInterrupt
    if not _atexit_registered:
        atexit.register(_shutdown_at_exit)
        _install_excepthook()
        _atexit_registered = True


def _register_process_sets(sets):
    # Only sets not registered yet: init() twice with the same list registers them once.
    if sets is None or sets == "dynamic":
        return
    _process_sets.register_initial([ps for ps in sets if getattr(ps, "process_set_id", None) is None])


def reinit():
    """``init()`` again with the settings of the last explicit ``init(...)`` call: after
    ``shutdown()``, an elastic worker joins the job's next generation this way."""
    init(**(_explicit_overrides or {}))


def _discovered(overrides):
    """Identity and store from mpirun / srun when neither tfringrun nor the caller gave a rank."""
    if "TFRING_RANK" in overrides:
        return {}
    from tfring._basics import environment_discovery

    return environment_discovery.discover() or {}


def _env_name(key):
    key = key.upper()
    return key if key.startswith("TFRING_") else "TFRING_" + key


def _env_value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _install_excepthook():
    """An uncaught exception tells the other ranks why this one leaves: their pending and
    later collectives fail with AbortedError "rank N exited: uncaught <type>: <message>"
    instead of a bare lost connection."""
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        previous(exc_type, exc, tb)
        if _core.is_initialized() and not issubclass(exc_type, KeyboardInterrupt):
            # already failing and the traceback is printed: a failing shutdown adds nothing
            with contextlib.suppress(Exception):
                _core.shutdown(f"uncaught {exc_type.__name__}: {exc}"[:2000])

    sys.excepthook = hook


def _shutdown_at_exit():
    with contextlib.suppress(Exception):  # nothing useful to do at interpreter exit
        _core.shutdown()


def shutdown(reason=None):
    """Stops the background thread; pending collectives fail with PreconditionError.
    Idempotent; ``init()`` may be called again afterwards.

    Args:
      reason: why this rank leaves, when it is because of an error (e.g.
        ``f"{type(e).__name__}: {e}"``). The other ranks' pending and later collectives
        then fail with ``AbortedError: rank N exited: <reason>`` instead of learning only
        that this rank has shut down. An uncaught exception does this by itself (through
        ``sys.excepthook``); code that catches it, or runs in a thread (Ray's training
        function), calls ``shutdown(reason)``.

    Example:
      ```python
      try:
          train()
      except Exception as e:
          tfring.shutdown(reason=f"{type(e).__name__}: {e}")
          raise
      ```
    """
    if reason is not None and not isinstance(reason, str):
        raise TypeError(f"reason must be a string or None. Received: {reason!r}")
    _core.shutdown((reason or "")[:2000])
    auto_names.reset()
    _process_sets.reset()


def is_initialized():
    return _core.is_initialized()


def rank():
    """Global rank of this process (0..size-1). Raises PreconditionError before init()."""
    return _core.rank()


def size():
    """Number of processes in the job."""
    return _core.size()


def local_rank():
    """Rank among the processes on this host (use it to pick a GPU)."""
    return _core.local_rank()


def local_size():
    return _core.local_size()


def cross_rank():
    """Index of this host among the job's hosts."""
    return _core.cross_rank()


def cross_size():
    return _core.cross_size()


def is_homogeneous():
    """True when every host runs the same number of ranks (Horovod's ``is_homogeneous``).
    Known from init on every rank; hosts are told apart as for shared memory (hostname,
    boot id and the cross rank). Raises ``PreconditionError`` before ``init()``."""
    return _core.is_homogeneous()


def config():
    """Effective settings after init: ``{name: (value, source)}`` where source is
    ``default``, ``env`` or ``argument``. The secret is shown as ``<hidden>``."""
    return _core.config()


def config_table():
    """Every TFRING_* setting: name, type, default, bounds, description."""
    return _core.config_table()


def stats():
    """This rank's counters since init (cheap, always on), as a dict: collectives, tensors,
    fused_tensors, fusion_ratio, bytes_reduced, bytes_sent, bytes_received, stall_warnings,
    cached_tensors, fusion_copied_bytes, control_bytes_sent, control_messages_sent, negotiation_seconds, wait_for_slowest_seconds, queue_seconds, transfer_seconds,
    allreduce_transfer_seconds, execute_seconds, size. docs/monitoring.md defines each;
    ``tfring.monitoring`` turns two snapshots into per-interval metrics."""
    return _core.stats()


def start_timeline(path, mark_cycles=False):
    """Rank 0 starts writing a Chrome-trace / Perfetto JSON of every collective to ``path``
    (negotiation with a mark per rank as it becomes ready, fusion copies, transfer, bytes).
    Other ranks accept the call and do nothing. Also: ``TFRING_TIMELINE=path`` or
    ``tfringrun --timeline-filename path``. ``mark_cycles`` is taken for Horovod's
    signature; tfring's timeline has no cycle markers, so True only warns."""
    if mark_cycles:
        warnings.warn("start_timeline(mark_cycles=True): tfring's timeline has no cycle markers; the timeline "
                      "is written without them", stacklevel=2)
    _core.start_timeline(str(path))


def stop_timeline():
    """Closes the timeline file (valid JSON from then on)."""
    _core.stop_timeline()


def build_info():
    """What this build supports: cpu, tcp, shm, nccl."""
    return _core.build_info()


def _running_under_launcher():
    return "TFRING_RANK" in os.environ
