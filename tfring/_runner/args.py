"""Command line of ``tfringrun``: ``tfringrun [options] [--] command [args...]``.

Everything after the first word that is not an option (or after ``--``) is the worker
command, passed through untouched. Errors in the command line raise ``UsageError``; the
launcher prints it and exits with code 2 before starting anything.
"""

import argparse
import math

from tfring._runner import binding, settings

EPILOG = """\
examples:
  tfringrun -np 2 python train.py --epochs 3
  tfringrun -np 4 --output-filename logs --fusion-threshold-mb 32 -- python train.py
  tfringrun -H localhost:2 python train.py
  tfringrun -np 8 -H host1:4,host2:4 --network-interface eth0 python train.py

Each worker gets TFRING_RANK, TFRING_SIZE, TFRING_LOCAL_RANK, TFRING_LOCAL_SIZE,
TFRING_CROSS_RANK, TFRING_CROSS_SIZE, TFRING_STORE_ADDR and TFRING_SECRET. Exit code: 0
when every rank succeeds, else the first failing rank's code (128+N when killed by signal
N), 130/143 when tfringrun itself gets SIGINT/SIGTERM, 2 for a bad command line.
See docs/launcher.md."""


class UsageError(Exception):
    """A bad command line or setting (exit code 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def build_parser():
    p = _Parser(prog="tfringrun", allow_abbrev=False, epilog=EPILOG,
                formatter_class=argparse.RawDescriptionHelpFormatter,
                description="Starts a tfring job: N worker processes that find each other "
                            "through a key-value store served by tfringrun.")
    p.add_argument("-np", "--num-proc", dest="num_proc", type=int, metavar="N",
                   help="number of worker processes (default: every slot of -H / --hostfile)")
    hosts = p.add_mutually_exclusive_group()
    hosts.add_argument("-H", "--hosts", metavar="HOST:SLOTS,...",
                       help="hosts and their slots, e.g. host1:4,host2:4 (slots default to 1); "
                            "hosts other than this machine are reached over ssh")
    hosts.add_argument("--hostfile", metavar="FILE", help="file of lines 'host slots=N'")
    multi = p.add_argument_group("other hosts (see docs/launcher.md, 'Several hosts')")
    multi.add_argument("--ssh-port", type=int, metavar="PORT", help="port of the remote hosts' ssh servers")
    multi.add_argument("--ssh-identity-file", metavar="FILE", help="private key for ssh (ssh -i)")
    multi.add_argument("--remote-command", metavar="TEMPLATE",
                       help="how to run a shell command line on a host instead of ssh, with {host} "
                            "and the word {command}, e.g. 'ip netns exec {host} sh -c {command}' "
                            "(default: $TFRING_REMOTE_COMMAND, else ssh)")
    multi.add_argument("--network-interface", metavar="IFACE",
                       help="the store and every worker listen on this interface's address on their "
                            "host (e.g. eth0; same name on every host)")
    elastic = p.add_argument_group("elastic jobs (see docs/elastic.md); any of --min-np, --max-np, "
                                   "--host-discovery-script makes the job elastic")
    elastic.add_argument("--min-np", type=int, metavar="N",
                         help="fewest workers the job runs with; below it, it waits --elastic-timeout for "
                              "hosts (default: -np, else 1)")
    elastic.add_argument("--max-np", type=int, metavar="N", help="most workers the job grows to (default: no limit)")
    elastic.add_argument("--host-discovery-script", metavar="FILE",
                         help="executable printing the usable hosts, one 'host' or 'host:slots' per line; run "
                              "again every --discovery-interval-s (default: the hosts of -H / --hostfile / -np)")
    elastic.add_argument("--slots", type=int, default=1, metavar="N",
                         help="slots of a host the discovery script lists without ':slots' (default 1)")
    elastic.add_argument("--reset-limit", type=int, metavar="N",
                         help="end the job instead of re-forming it more than N times (default: no limit)")
    elastic.add_argument("--elastic-timeout", type=float, default=600.0, metavar="S",
                         help="how long to wait for --min-np workers before ending the job (default 600)")
    elastic.add_argument("--blacklist-cooldown-range", type=float, nargs=2, metavar=("MIN", "MAX"),
                         help="a host whose worker failed comes back after MIN s, doubling per failure up to "
                              "MAX s (default: it stays out for the rest of the job)")
    elastic.add_argument("--discovery-interval-s", type=float, default=1.0, metavar="S",
                         help="how often the discovery script runs (default 1)")
    p.add_argument("--bind-to", choices=binding.MODES, default="core",
                   help="CPUs of each local rank: core (default: an equal share of whole cores of the "
                        "launcher's affinity mask; no binding when there are fewer cores than local ranks), "
                        "socket, numa (one socket / NUMA node each), none")
    p.add_argument("--grace-period-s", type=float, default=5.0, metavar="S",
                   help="after SIGTERM, how long workers get to exit before SIGKILL (default 5)")
    p.add_argument("--output-filename", metavar="DIR",
                   help="also write each rank's output (stdout and stderr) to DIR/rank.N.log")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="print the slot plan, the store address and every worker's start and exit")
    p.add_argument("--check-build", action="store_true",
                   help="print what this tfring build supports and exit")
    settings.add_flags(p)
    p.add_argument("command", nargs=argparse.REMAINDER, help="the worker command and its arguments")
    return p


def parse(argv):
    """Parses ``argv`` (without the program name).

    Returns:
      argparse.Namespace; ``command`` is a non-empty list unless ``check_build`` is set.

    Raises:
      UsageError: bad or missing options, or no command.
    """
    ns = build_parser().parse_args(argv)
    if ns.command and ns.command[0] == "--":
        ns.command = ns.command[1:]
    if ns.check_build:
        return ns
    return check(ns)


def options(command, **flags):
    """The launcher's options for Python callers (``tfring.run``), without a command line:
    the namespace ``parse`` returns for ``command`` and ``flags``, each named by its
    namespace attribute (``num_proc=2``, ``hosts="a:2,b:2"``, ``start_timeout=30``, ...) and
    converted as the parser converts its flag's text; ``None`` leaves a default.

    Raises:
      TypeError: a name that is no launcher option.
      UsageError: a value the command line would refuse (the same message).
    """
    parser = build_parser()
    ns = parser.parse_args([])
    actions = {action.dest: action for action in parser._actions}  # argparse has no public table
    for dest, value in flags.items():
        action = actions.get(dest)
        if action is None or dest in ("help", "command", "check_build"):
            raise TypeError(f"no launcher option {dest!r}")
        if value is None:
            continue
        if action.nargs == 0:  # a switch (-v)
            value = bool(value)
        else:
            convert = action.type or str
            try:
                value = [convert(v) for v in value] if action.nargs else convert(value)
            except (TypeError, ValueError):
                raise UsageError(f"argument {'/'.join(action.option_strings)}: invalid value: {value!r}") from None
            if action.choices is not None and value not in action.choices:
                raise UsageError(f"argument {'/'.join(action.option_strings)}: invalid choice: {value!r}")
        setattr(ns, dest, value)
    ns.command = list(command)
    return check(ns)


def check(ns):
    """Checks a parsed namespace as a whole (what argparse cannot); returns it.

    Raises:
      UsageError: no command, no number of processes, or a value out of range.
    """
    if not ns.command:
        raise UsageError("no command given: tfringrun -np N [--] command [args...]")
    if ns.num_proc is None and ns.hosts is None and ns.hostfile is None and not is_elastic(ns):
        raise UsageError("give the number of processes with -np N (or hosts with -H / --hostfile)")
    if ns.ssh_port is not None and not 0 < ns.ssh_port < 65536:
        raise UsageError(f"--ssh-port must be in 1..65535. Received: {ns.ssh_port}")
    if not (math.isfinite(ns.grace_period_s) and ns.grace_period_s >= 0):
        raise UsageError(f"--grace-period-s must be a finite number >= 0. Received: {ns.grace_period_s}")
    _check_elastic(ns)
    return ns


def is_elastic(ns):
    """True when the command line asks for an elastic job."""
    return ns.min_np is not None or ns.max_np is not None or ns.host_discovery_script is not None


def _check_elastic(ns):
    if not is_elastic(ns):
        return
    for flag, value in (("--min-np", ns.min_np), ("--max-np", ns.max_np), ("-np", ns.num_proc),
                        ("--slots", ns.slots)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be at least 1. Received: {value}")
    if ns.reset_limit is not None and ns.reset_limit < 0:
        raise UsageError(f"--reset-limit must be >= 0. Received: {ns.reset_limit}")
    if ns.min_np is None:
        ns.min_np = ns.num_proc or 1
    if ns.max_np is not None and ns.max_np < ns.min_np:
        raise UsageError(f"--max-np {ns.max_np} is below --min-np {ns.min_np}")
    if ns.num_proc is not None and (ns.num_proc < ns.min_np or (ns.max_np is not None and ns.num_proc > ns.max_np)):
        raise UsageError(f"-np {ns.num_proc} must lie between --min-np {ns.min_np} and --max-np {ns.max_np}")
    if ns.host_discovery_script is not None and (ns.hosts is not None or ns.hostfile is not None):
        raise UsageError("give the hosts either with --host-discovery-script or with -H / --hostfile, not both")
    for flag, value in (("--elastic-timeout", ns.elastic_timeout), ("--discovery-interval-s", ns.discovery_interval_s)):
        if not (math.isfinite(value) and value > 0):
            raise UsageError(f"{flag} must be a finite number > 0. Received: {value}")
    if ns.blacklist_cooldown_range is not None:
        lo, hi = ns.blacklist_cooldown_range
        if not (0 < lo <= hi and math.isfinite(hi)):
            raise UsageError(f"--blacklist-cooldown-range needs 0 < MIN <= MAX. Received: {lo:g} {hi:g}")
