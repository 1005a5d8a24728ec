"""``tfringrun``: starts the workers of a tfring job (here and over ssh) and supervises them.

    tfringrun -np 2 python train.py
    python -m tfring.runner.launch -np 2 python train.py

Steps: parse the command line, plan the slots, validate every setting with the core (all
before starting anything; a bad one exits 2), serve the job's authenticated key-value
store in this process, start one worker per slot with its TFRING_* environment, copy their
output with rank prefixes, and stop the whole job when a rank fails or the launcher is
signalled (see supervisor.py for the policy and exit codes). docs/launcher.md has the
user's view.
"""

import os
import sys

from tfring import _core
from tfring._bootstrap import providers
from tfring._runner import args as args_lib
from tfring._runner import binding, jobenv, placement
from tfring._runner import hosts as hosts_lib
from tfring._runner import settings as settings_lib
from tfring._runner import store_hook as store_hook_lib
from tfring._runner.blame import Blame
from tfring._runner.output import Output
from tfring._runner.signals import SignalRelay
from tfring._runner.supervisor import Job
from tfring._runner.tracebacks import Tracebacks

USAGE_ERROR = 2


def _error(text):
    print(f"tfringrun: error: {text}", file=sys.stderr, flush=True)
    return USAGE_ERROR


def check_build():
    """Prints what this build supports (``--check-build``)."""
    from tfring._basics import __version__

    info = _core.build_info()
    lines = [f"tfring {__version__} (core: {_core.__file__})", "Available features:"]
    for name, value in info.items():
        lines.append(f"    [{'X' if value else ' '}] {name}" if isinstance(value, bool) else f"    {name}: {value}")
    mpi = _mpi4py_version()
    lines.append(f"    [{'X' if mpi else ' '}] mpi" + (f" (mpi4py {mpi}: under mpirun/srun rank 0 shares the "
                                                        "store through MPI)" if mpi else " (mpi4py not importable)"))
    print("\n".join(lines), flush=True)
    return 0


def _mpi4py_version():
    """mpi4py's version when it can be imported (without starting MPI), else None."""
    import importlib.metadata
    import importlib.util

    if importlib.util.find_spec("mpi4py") is None:
        return None
    try:
        return importlib.metadata.version("mpi4py")
    except importlib.metadata.PackageNotFoundError:
        return "unknown version"


def _plan(ns, environ):
    """(slots, placement, settings) for the parsed command line; raises ValueError."""
    hosts = None
    if ns.hosts is not None:
        hosts = hosts_lib.parse_hosts(ns.hosts)
    elif ns.hostfile is not None:
        hosts = hosts_lib.parse_hostfile(ns.hostfile)
    slots = hosts_lib.plan(hosts, ns.num_proc)
    job_settings = settings_lib.collect(ns, environ)
    for slot in slots:
        settings_lib.validate(job_settings, slot.env())
    return slots, placement.place(slots, ns, job_settings, environ), job_settings


def _warn_if_oversubscribed(output, slots, place, job_settings):
    """One warning for the job when it starts more ranks on this host than this process may
    use CPUs (``binding.oversubscription_warning``), unless TFRING_LOG_LEVEL hides warnings
    of the ``cpu`` subsystem."""
    text = binding.oversubscription_warning(sum(not place.is_remote(s) for s in slots), binding.cpu_count())
    if text and settings_lib.log_enabled(job_settings, "warning", "cpu"):
        output.message(text)


def launch(argv=None):
    """Runs tfringrun with ``argv`` (default: sys.argv[1:]). Returns the exit code."""
    try:
        ns = args_lib.parse(sys.argv[1:] if argv is None else list(argv))
    except args_lib.UsageError as e:
        return _error(f"{e} (see tfringrun --help)")
    if ns.check_build:
        return check_build()
    return launch_job(ns)


def launch_job(ns, environ=None, store_hook=None):
    """Runs the job of ``ns`` (``args.parse``'s namespace, or ``args.options``' for callers
    in Python: ``tfring.run``) to its end. Returns the exit code; a plan the launcher
    refuses is printed and returns 2 before anything starts.

    ``environ`` replaces ``os.environ`` as the base of every worker's environment and
    settings (static jobs); ``store_hook(store)`` returns a context manager entered once
    the job's store serves (before any worker starts) and exited after every worker has
    ended, before the store stops. Blocks until the job ends; run it on the main thread (it
    handles SIGINT/SIGTERM/SIGHUP while it runs).
    """
    environ = os.environ if environ is None else environ
    if args_lib.is_elastic(ns):
        # The elastic driver is the layer above the launcher (tfring/_elastic/launch.py).
        return providers.get("elastic_launch")(ns, _error, store_hook)
    try:
        slots, place, job_settings = _plan(ns, environ)
        blame, tracebacks = Blame(), Tracebacks()

        def observe(rank, text):
            blame.observe(rank, text)
            tracebacks.observe(rank, text)

        output = Output(log_dir=ns.output_filename, observer=observe)
    except ValueError as e:
        return _error(str(e))

    with SignalRelay() as relay:
        try:
            with store_hook_lib.serving(place.store_bind, store_hook, output, ns.verbose) as store:
                job = Job(output, blame, ns.grace_period_s, verbose=ns.verbose,
                          stopped_limit_s=settings_lib.float_value(job_settings, "TFRING_PEER_TIMEOUT_S")
                          if len(slots) > 1 else None, tracebacks=tracebacks)
                _warn_if_oversubscribed(output, slots, place, job_settings)
                if ns.verbose:
                    output.message(f"store at {store.address} (the job secret is in TFRING_SECRET, never shown)")
                    output.message(jobenv.describe(job_settings))
                    output.message("command: " + " ".join(ns.command))
                    for s in slots:
                        output.message(f"rank {s.rank}: host {s.host}, local rank {s.local_rank} of "
                                       f"{s.local_size}, cross rank {s.cross_rank} of {s.cross_size}")
                    for host in place.remote_hosts:
                        output.message(f"host {host} through: {place.spawners[host].describe()}")
                for slot in slots:
                    if job.stopping or relay.received:
                        break
                    env = place.worker_env(environ, slot, job_settings, store.address, store.secret)
                    env[binding.ENV] = ns.bind_to
                    if ns.verbose and not place.is_remote(slot):
                        output.message(f"rank {slot.rank} bound to CPUs "
                                       f"{binding.describe(binding.cpus_from_env(env))} (--bind-to {ns.bind_to})")
                    job.start(slot, place.spawners[slot.host], ns.command, env)
                code = job.run(relay)
        except store_hook_lib.StoreBindError as e:
            return _error(str(e))
    return code


def main(argv=None):
    """Console-script entry point of ``tfringrun``: returns the exit code."""
    return launch(argv)


if __name__ == "__main__":
    sys.exit(main())
