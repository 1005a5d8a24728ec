"""``tfring.run(fn, ...)``: a tfring job started from Python (a script, a Jupyter notebook),
with ``horovod.run``'s signature where it applies.

The job is exactly a ``tfringrun`` job (same slot plan, CPU binding, authenticated store,
output with rank prefixes, fail-fast and signal policy: launch.py and supervisor.py) whose
command is ``<executable> -m tfring._runner.function_worker``, started through the
launcher's Python API (``args.options`` and ``launch.launch_job``: no command line is built
or parsed); fn and its arguments travel by
cloudpickle through the job's store, so a function defined in a notebook cell works.

Blocking: returns when every rank has ended. Run it on the main thread (the launcher
handles SIGINT there: Ctrl-C or a kernel interrupt is passed to every rank, and then
raises KeyboardInterrupt here; no rank is left running).
"""

import contextlib
import os
import sys
import threading

from tfring._runner import args as args_lib
from tfring._runner import function_job, jobenv

INTERRUPTED = (129, 130, 143)  # the launcher got SIGHUP / SIGINT / SIGTERM


def _options(np, min_np, max_np, slots, reset_limit, cooldown_range, hosts, start_timeout, executable, **flags):
    """The launcher's options for ``run``'s arguments (``args.options``: no command line)."""
    return args_lib.options(
        [executable or sys.executable, "-m", "tfring._runner.function_worker"],
        num_proc=np, min_np=min_np, max_np=max_np, slots=slots, reset_limit=reset_limit,
        blacklist_cooldown_range=cooldown_range, start_timeout=start_timeout,
        hosts=hosts if hosts is None or isinstance(hosts, str) else ",".join(hosts), **flags)


def _worker_environ(env):
    """The workers' base environment: ``env`` (default: this process's), with the entries of
    this process's ``sys.path`` that its interpreter does not have by itself (the script's
    or notebook's directory, paths added at run time) on PYTHONPATH, so fn's modules import
    there as here. Entries inside the interpreter's prefix stay out: on PYTHONPATH they
    would go ahead of the standard library."""
    out = dict(os.environ if env is None else env)
    prefixes = tuple(os.path.join(os.path.realpath(p), "") for p in {sys.prefix, sys.base_prefix})
    here = [p for p in sys.path if p and os.path.isdir(p)
            and not os.path.join(os.path.realpath(p), "").startswith(prefixes)]
    cwd = os.getcwd()
    if "" in sys.path and cwd not in here:
        here.insert(0, cwd)
    old = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p]
    out["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(old + here))
    return out


def run(fn, args=(), kwargs=None, np=1, min_np=None, max_np=None, slots=None, reset_limit=None, cooldown_range=None,
        hosts=None,
        hostfile=None, start_timeout=None, ssh_port=None, ssh_identity_file=None, disable_cache=None,
        output_filename=None, verbose=None, use_gloo=None, use_mpi=None, mpi_args=None, network_interface=None,
        executable=None, env=None):
    """Runs ``fn(*args, **kwargs)`` on ``np`` ranks and returns their results by rank.

    Args:
      fn: the function every rank runs (it calls ``tfring.init()`` itself, or
        ``hvd.init()`` in migrated code). Sent by value with cloudpickle.
      args, kwargs: its arguments (pickled too).
      np: number of ranks (``tfringrun -np``).
      min_np, max_np, slots, reset_limit, cooldown_range: make the job elastic (``tfringrun
        --min-np``, ``--max-np``, ``--slots``, ``--reset-limit``, ``--blacklist-cooldown-range``);
        results are then ordered by the rank each worker held when fn ended.
      hosts: ``"host1:2,host2:2"`` or a list of ``"host:slots"``; hostfile: a hostfile path.
      start_timeout: seconds the ranks wait for each other (TFRING_START_TIMEOUT_S).
      ssh_port, ssh_identity_file, network_interface, output_filename, verbose: as the
        ``tfringrun`` flags of the same names.
      executable: the Python the ranks run (default ``sys.executable``).
      env: the ranks' base environment (default this process's).
      disable_cache, use_gloo: accepted for horovod.run compatibility; no effect (tfring has
        one controller and always caches).
      use_mpi, mpi_args: refused; run a script under ``mpirun`` for MPI (docs/launcher.md).

    Returns:
      A list: fn's return value of rank 0, 1, ...

    Raises:
      TypeError: fn or an argument cannot be pickled (names which).
      ValueError: a bad option (the launcher's message).
      tfring.spark.RankError: a rank's fn raised (the first rank to fail; its
        exception is the ``__cause__``, its traceback is in the message).
      RuntimeError: the job failed without a Python exception (a rank was killed); or not
        called from the main thread.
      KeyboardInterrupt: the caller was interrupted; every rank was stopped.
    """
    from tfring import _core
    from tfring._runner import launch

    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("tfring.run must be called from the main thread: it passes Ctrl-C and other signals "
                           "to the ranks, and Python delivers signals there only")
    if use_mpi or mpi_args:
        raise ValueError("tfring.run starts its ranks itself, as tfringrun does (use_mpi / mpi_args are not "
                         "supported): to use mpirun, put fn in a script and run `mpirun -np N python script.py`")
    elastic = any(v is not None for v in (min_np, max_np))
    if elastic and env is not None:
        raise ValueError("tfring.run: env is not supported for elastic jobs (min_np / max_np); set the "
                         "variables in os.environ instead")
    try:
        ns = _options(np, min_np, max_np, slots, reset_limit, cooldown_range, hosts, start_timeout, executable,
                      hostfile=hostfile, ssh_port=ssh_port, ssh_identity_file=ssh_identity_file,
                      output_filename=output_filename, verbose=verbose, network_interface=network_interface)
    except args_lib.UsageError as e:
        raise ValueError(f"tfring.run: {e}") from None
    payload = function_job.pack(fn, args, kwargs)
    found = {}

    @contextlib.contextmanager
    def publish(store):
        client = _core.StoreClient(*jobenv.split_store_address(store.address), store.secret, 30.0)
        client.set(function_job.FN_KEY, payload)
        try:
            yield
        finally:
            found["reports"] = function_job.read_reports(client)

    environ = _worker_environ(env)
    if elastic:
        saved = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = environ["PYTHONPATH"]
    try:
        code = launch.launch_job(ns, environ=None if elastic else environ, store_hook=publish)
    finally:
        if elastic:
            os.environ.pop("PYTHONPATH") if saved is None else os.environ.__setitem__("PYTHONPATH", saved)
    if "reports" not in found:
        raise ValueError(f"tfring.run: the launcher refused the job (exit code {code}); its message above says why")
    reports = found["reports"]
    if code in INTERRUPTED:
        raise KeyboardInterrupt(f"tfring.run: interrupted (launcher exit code {code}); every rank was stopped")
    failure = function_job.first_failure(reports)
    if failure is not None:
        function_job.raise_failure(failure)
    if code != 0:
        raise RuntimeError(f"tfring.run: the job failed with exit code {code} without a Python exception on any "
                           "rank (a rank was killed or crashed); the output above names it")
    return function_job.values_by_rank(reports, None if elastic else ns.num_proc or len(reports))
