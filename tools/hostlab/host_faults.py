"""Host-level faults over the lab's emulated hosts (tools/hostlab/netns.py), for tests
and benchmarks: what fails on a cluster is a host (all its ranks at once, and the
launcher's connection to it), a link, or a slow link, not one process.

    with NetnsHosts(3) as hosts:
        faults = HostFaults(hosts)
        ... start a job with hosts.launch_args(2, own_hostnames=True) ...
        faults.kill(2)                  # SIGKILL every process of host 2
        faults.cut(1); faults.heal(1)   # its link down (packets vanish, no reset), up again
        faults.throttle(1, 10e6)        # tbf: 10 Mbit/s each way; unthrottle(1) undoes it
        faults.freeze(1); faults.thaw(1)    # SIGSTOP / SIGCONT every process of host 1
        faults.later(2.0, "kill", 2)    # the same from a timer thread, 2 s from now
        faults.random_fault(rng, kinds=("kill", "cut", "freeze"), spare=(0,))
        faults.stop_all()               # teardown: SIGCONT + SIGKILL whatever is left

Every fault returns a ``Fault`` record (kind, host index and name, wall-clock time, the
pids it touched) and is appended to ``faults.log``. "Every process of a host" is every
process whose network namespace is the host's (``ip netns pids``): the remote command's
bootstrap and the workers it started, never tfringrun itself (it runs here, outside).

Needs what netns.py needs (root or CAP_NET_ADMIN, iproute2, tc).
"""

import dataclasses
import os
import signal
import threading
import time

from tools.hostlab.netns import _run, tbf_words

KINDS = ("kill", "cut", "freeze", "throttle")


@dataclasses.dataclass
class Fault:
    kind: str  # kill | cut | heal | freeze | thaw | throttle | unthrottle
    host: int  # index into NetnsHosts.names
    name: str  # the namespace (and, with own_hostnames, the hostname) of that host
    at: float  # time.time() just before the fault was applied
    pids: list = dataclasses.field(default_factory=list)  # processes signalled (kill, freeze, thaw)


def _signal_all(pids, signum):
    hit = []
    for pid in pids:
        try:
            os.kill(pid, signum)
            hit.append(pid)
        except ProcessLookupError:
            pass
    return hit


class HostFaults:
    """Faults on the hosts of one ``NetnsHosts`` (created). Thread-safe: a fault may come
    from a timer thread while the test waits on the job."""

    def __init__(self, hosts):
        self.hosts = hosts
        self.log = []
        self._lock = threading.Lock()
        self._timers = []
        self._throttled = set()
        self._cut = set()
        self._frozen = set()

    # ------------------------------------------------------------ what runs where

    def pids(self, host):
        """Pids of every process in host ``host``'s network namespace (the bootstrap of
        each remote worker, the workers, their children)."""
        out = _run(["ip", "netns", "pids", self.hosts.names[host]], check=False)
        return [int(p) for p in out.stdout.split() if p.isdigit() and int(p) != os.getpid()]

    def leftovers(self):
        """{host name: [pid, ...]} of every host that still has a process (none after a
        clean job end)."""
        return {self.hosts.names[i]: p for i in range(len(self.hosts.names)) if (p := self.pids(i))}

    def _record(self, kind, host, pids=()):
        fault = Fault(kind, host, self.hosts.names[host], time.time(), list(pids))
        with self._lock:
            self.log.append(fault)
        return fault

    # ------------------------------------------------------------ the faults

    def kill(self, host, signum=signal.SIGKILL):
        """Sends ``signum`` (SIGKILL) to every process of the host at once: a host that
        crashed, lost power or was preempted. Its ranks' TCP connections are reset by this
        kernel, as a rebooted host's would be after it came back."""
        fault = self._record("kill", host)
        fault.pids = _signal_all(self.pids(host), signum)
        return fault

    def freeze(self, host):
        """SIGSTOP every process of the host: a paused VM, a host swapped out or hung in
        its kernel. Connections stay open; only heartbeats can tell."""
        fault = self._record("freeze", host)
        fault.pids = _signal_all(self.pids(host), signal.SIGSTOP)
        self._frozen.add(host)
        return fault

    def thaw(self, host):
        """SIGCONT every process of the host."""
        fault = self._record("thaw", host)
        fault.pids = _signal_all(self.pids(host), signal.SIGCONT)
        self._frozen.discard(host)
        return fault

    def cut(self, host):
        """Takes the host's link down (its veth on the bridge side): packets to and from it
        vanish, nobody gets a reset; both sides are alive and each thinks the other died."""
        fault = self._record("cut", host)
        self._ip_link(host, "down")
        self._cut.add(host)
        return fault

    def heal(self, host):
        """Brings a cut link back up."""
        fault = self._record("heal", host)
        self._ip_link(host, "up")
        self._cut.discard(host)
        return fault

    def throttle(self, host, rate_bits):
        """Limits the host's link to ``rate_bits`` bits/s each way (tbf on both ends of its
        veth): a slow or congested NIC, a straggler host."""
        fault = self._record("throttle", host)
        name, veth = self.hosts.names[host], self.hosts._veths[host]
        _run(tbf_words(veth, rate_bits))
        _run(tbf_words(self.hosts.interface, rate_bits, netns=name))
        self._throttled.add(host)
        return fault

    def unthrottle(self, host):
        """Gives the host back the rate of the others (``hosts.rate_bits``, else no limit)."""
        fault = self._record("unthrottle", host)
        name, veth = self.hosts.names[host], self.hosts._veths[host]
        if self.hosts.rate_bits:
            _run(tbf_words(veth, self.hosts.rate_bits))
            _run(tbf_words(self.hosts.interface, self.hosts.rate_bits, netns=name))
        else:
            _run(["tc", "qdisc", "del", "dev", veth, "root"], check=False)
            _run(["tc", "-n", name, "qdisc", "del", "dev", self.hosts.interface, "root"], check=False)
        self._throttled.discard(host)
        return fault

    def apply(self, kind, host, **kw):
        """One fault by name: ``kill``, ``cut``, ``heal``, ``freeze``, ``thaw``,
        ``throttle`` (``rate_bits=``), ``unthrottle``."""
        if kind not in ("kill", "cut", "heal", "freeze", "thaw", "throttle", "unthrottle"):
            raise ValueError(f"unknown host fault {kind!r}; one of kill, cut, heal, freeze, thaw, throttle, "
                             "unthrottle")
        return getattr(self, kind)(host, **kw)

    def random_fault(self, rng, kinds=KINDS, spare=(0,), rate_bits=10e6):
        """A fault of a random kind on a random host not in ``spare`` (by default host 0,
        where rank 0 and, with the lab's layout, the launcher's store are reached from)."""
        kind = kinds[int(rng.integers(len(kinds)))]
        candidates = [i for i in range(len(self.hosts.names)) if i not in spare]
        host = candidates[int(rng.integers(len(candidates)))]
        return self.apply(kind, host, **({"rate_bits": rate_bits} if kind == "throttle" else {}))

    def later(self, delay_s, kind, host, **kw):
        """Applies ``kind`` to ``host`` from a timer thread after ``delay_s`` seconds;
        returns the timer (``cancel()`` it if the job ended first)."""
        timer = threading.Timer(delay_s, self.apply, (kind, host), kw)
        timer.daemon = True
        self._timers.append(timer)
        timer.start()
        return timer

    def when(self, condition, kind, host, timeout_s=60.0, poll_s=0.02, **kw):
        """Applies ``kind`` to ``host`` from a thread as soon as ``condition()`` is true
        (e.g. a marker file a rank writes at the chosen moment of its ``fit``), or never if
        ``timeout_s`` passes first. Returns the thread; its fault lands in ``log``."""
        def watch():
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if condition():
                    self.apply(kind, host, **kw)
                    return
                time.sleep(poll_s)

        thread = threading.Thread(target=watch, daemon=True)
        thread.start()
        return thread

    # ------------------------------------------------------------ clean-up

    def restore(self):
        """Heals every cut link, thaws every frozen host, unthrottles every throttled one."""
        for timer in self._timers:
            timer.cancel()
        for host in sorted(self._cut):
            self.heal(host)
        for host in sorted(self._frozen):
            self.thaw(host)
        for host in sorted(self._throttled):
            self.unthrottle(host)

    def stop_all(self):
        """Test teardown: restores the links, then SIGCONT and SIGKILL every process left
        in any host; returns what was left ({host name: [pids]}) before that."""
        self.restore()
        left = self.leftovers()
        for pids in left.values():
            _signal_all(pids, signal.SIGCONT)
            _signal_all(pids, signal.SIGKILL)
        return left

    def _ip_link(self, host, state):
        _run(["ip", "link", "set", self.hosts._veths[host], state])

