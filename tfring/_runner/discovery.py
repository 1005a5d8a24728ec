"""Which hosts an elastic job may use now: a host discovery script (Horovod's format) or
a fixed host list, and the hosts blacklisted after their workers failed.

A discovery script prints one host per line, ``host`` or ``host:slots`` (slots default to
``--slots``); blank lines and ``#`` comments are skipped. It is run again every
``--discovery-interval-s``; a script that fails, hangs past ``SCRIPT_TIMEOUT_S`` or prints
a bad line keeps the previous answer and is reported once per distinct problem.

Pure bookkeeping except ``ScriptDiscovery.hosts`` (runs the script). Main thread only.
"""

import subprocess

from tfring._runner import hosts as hosts_lib

SCRIPT_TIMEOUT_S = 10.0


def parse_discovery_output(text, default_slots, where):
    """``[Host]`` from a discovery script's output.

    Raises:
      ValueError: a malformed line (named with ``where`` and its line number), or a host
        listed twice.
    """
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        item = line.split("#", 1)[0].strip()
        if not item:
            continue
        found.append(hosts_lib.parse_host_item(item, default_slots, f"{where}, line {number}"))
    names = [h.name for h in found]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"{where}: host {name!r} is listed twice")
    return found


class FixedDiscovery:
    """The hosts of ``-H`` / ``--hostfile`` / ``localhost:-np``, never changing."""

    def __init__(self, hosts):
        self._hosts = list(hosts)

    def hosts(self):
        return list(self._hosts)

    def describe(self):
        return "hosts " + ",".join(f"{h.name}:{h.slots}" for h in self._hosts)


class ScriptDiscovery:
    """Runs ``script`` (an executable path, run without a shell) for the current hosts."""

    def __init__(self, script, default_slots, report):
        self.script = script
        self.default_slots = default_slots
        self._report = report  # f(text): tells the user about a failing script
        self._last = []
        self._last_problem = None

    def describe(self):
        return f"host discovery script {self.script} (default {self.default_slots} slot(s) per host)"

    def hosts(self):
        """The script's current hosts; the previous answer when the script fails."""
        problem = None
        try:
            done = subprocess.run([self.script], capture_output=True, text=True, timeout=SCRIPT_TIMEOUT_S,
                                  stdin=subprocess.DEVNULL, check=False)
            if done.returncode != 0:
                problem = (f"exited with code {done.returncode}: "
                           f"{(done.stderr or done.stdout).strip()[-300:]}")
            else:
                self._last = parse_discovery_output(done.stdout, self.default_slots,
                                                    f"--host-discovery-script {self.script}")
        except subprocess.TimeoutExpired:
            problem = f"did not finish within {SCRIPT_TIMEOUT_S:g} s"
        except OSError as e:
            problem = f"cannot be run: {e.strerror or e}"
        except ValueError as e:
            problem = str(e)
        if problem is not None and problem != self._last_problem:
            self._report(f"host discovery script {self.script} {problem}; keeping the last hosts it gave")
        self._last_problem = problem
        return list(self._last)


class Blacklist:
    """Hosts whose workers failed. Without a cooldown range a failed host stays out for the
    rest of the job (Horovod's default); with ``cooldown_range=(lo, hi)`` seconds it comes
    back after ``lo * 2**(failures - 1)`` seconds, at most ``hi``."""

    def __init__(self, cooldown_range=None):
        self.cooldown_range = cooldown_range
        self._failures = {}  # host -> count
        self._until = {}  # host -> monotonic time it may be used again (inf: never)

    def record_failure(self, host, now):
        """Counts a failed worker on ``host``; returns how long it stays out (inf: for good)."""
        count = self._failures.get(host, 0) + 1
        self._failures[host] = count
        if self.cooldown_range is None:
            wait = float("inf")
        else:
            lo, hi = self.cooldown_range
            wait = min(hi, lo * 2 ** (count - 1))
        self._until[host] = now + wait
        return wait

    def blocked(self, host, now):
        return self._until.get(host, 0.0) > now

    def permanent(self):
        return self.cooldown_range is None
