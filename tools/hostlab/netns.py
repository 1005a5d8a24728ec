"""Emulated hosts on one machine: network namespaces joined by a bridge, each host's link
optionally shaped to a NIC bandwidth with ``tc ... tbf`` (on both ends of its veth, so
both directions are limited). Shared by the scale lab and tests/test_launcher_multihost.py.

Layout (``count`` hosts, tag T chosen at random):

    this namespace: bridge T (address S.1/24)  --  veth Tv<i>  (tbf: traffic INTO host i)
    namespace Th<i>: interface named T (address S.<i+2>/24)    (tbf: traffic OUT of host i)

Every host's interface is named like the bridge, so ``tfringrun --network-interface T``
means the right interface on every host, and ``--remote-command 'ip netns exec {host} sh -c
{command}'`` starts a rank "on" host Th<i>. Processes in the namespaces are still local
processes (same CPUs, same files): only the network is separate.

Needs root (or CAP_NET_ADMIN) and iproute2, whose tools (``ip``, ``tc``, ``ss``) live in
/usr/sbin or /sbin, which a minimal PATH leaves out: call them through ``tool(name)``, which
also looks there, never by bare name. ``destroy()`` removes everything ``create()``
made, even half-made; ``cleanup(prefix)`` (or ``python -m tools.hostlab.netns --cleanup``)
removes whatever an interrupted run left behind under a prefix.

netem is not assumed (not available on the machines this was written on): no delay or
loss, only bandwidth.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import uuid

LAB_PREFIX = "tsl"  # the scale lab's names; tests use "tfr"
IP_TIMEOUT_S = 10
SBIN_DIRS = ("/usr/local/sbin", "/usr/sbin", "/sbin")  # searched after PATH (env -i PATH=/usr/bin:/bin lacks them)


def parse_hosts(spec):
    """'HOSTSxRANKS' (e.g. '4x2') -> (hosts, ranks per host)."""
    hosts, ranks = spec.lower().split("x")
    return int(hosts), int(ranks)


def require(context=""):
    """Exits (SystemExit with the reason, after `context`) where namespaces cannot be made here."""
    why = unavailable()
    if why:
        raise SystemExit(f"{context}{why}")


def tool(name, package="iproute2"):
    """The path of the system tool ``name`` (``ip``, ``tc``, ``ss``): found on PATH, else in
    ``SBIN_DIRS``. Raises FileNotFoundError naming the tool, where it looked and ``package``."""
    path = shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", os.defpath), *SBIN_DIRS]))
    if path is None:
        raise FileNotFoundError(f"'{name}' is neither on PATH nor in {', '.join(SBIN_DIRS)}: install the "
                                f"{package} package")
    return path


def unavailable():
    """None where namespaces can be made here, else why not (a sentence)."""
    if not sys.platform.startswith("linux"):
        return "needs Linux and iproute2 (ip)"
    try:
        ip = tool("ip")
    except FileNotFoundError as e:
        return f"needs iproute2: {e}"
    probe = f"tfrprobe{os.getpid()}"
    out = subprocess.run([ip, "netns", "add", probe], check=False, capture_output=True, text=True,
                         timeout=IP_TIMEOUT_S)
    if out.returncode != 0:
        return f"cannot create network namespaces here (needs root or CAP_NET_ADMIN): {out.stderr.strip()}"
    subprocess.run([ip, "netns", "del", probe], check=False, capture_output=True, timeout=IP_TIMEOUT_S)
    return None


def _run(words, check=True):
    """Runs iproute2's ``words[0]`` (``ip``, ``tc``; found by ``tool``) with the other words.
    Raises RuntimeError naming the command when it fails and ``check``; returns the result."""
    words = [tool(words[0]), *words[1:]]
    out = subprocess.run(words, check=False, capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(words)}: {out.stderr.strip()}")
    return out


def tbf_words(dev, rate_bits, netns=None):
    """``tc`` words that shape ``dev``'s egress to ``rate_bits`` bits/s with a token bucket.
    Burst: 1 ms of traffic (at least 16 KiB), so a transfer of a MiB is rate-bound, not
    burst-bound; the queue holds up to 20 ms before it drops."""
    rate_bytes = rate_bits / 8
    burst = max(16384, int(rate_bytes / 1000))
    ns = ["-n", netns] if netns else []
    return ["tc", *ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{int(rate_bits)}bit",
            "burst", str(burst), "latency", "20ms"]


class NetnsHosts:
    """``count`` emulated hosts (see the module docstring). A context manager:
    ``with NetnsHosts(4, rate_bits=1e9) as h: ...`` creates and always destroys them."""

    def __init__(self, count, prefix="tfr", rate_bits=None):
        tag = uuid.uuid4().hex[:5]
        self.prefix = prefix
        self.interface = f"{prefix}{tag}"
        self.names = [f"{prefix}{tag}h{i}" for i in range(count)]
        self._veths = [f"{prefix}{tag}v{i}" for i in range(count)]
        octet = int(tag, 16) % 200 + 20
        self.subnet = f"10.{octet}.{os.getpid() % 250}"
        self.addresses = [f"{self.subnet}.{i + 2}" for i in range(count)]
        self.rate_bits = rate_bits

    def _ip(self, *words):
        _run(["ip", *words])

    def create(self):
        """Builds the bridge, the namespaces and their links (and shapes them when
        ``rate_bits`` is set). Raises RuntimeError naming the failed command; what was made
        until then stays for ``destroy()``."""
        self._ip("link", "add", self.interface, "type", "bridge")
        self._ip("addr", "add", f"{self.subnet}.1/24", "dev", self.interface)
        self._ip("link", "set", self.interface, "up")
        for name, veth, address in zip(self.names, self._veths, self.addresses):
            self._ip("netns", "add", name)
            self._ip("link", "add", veth, "type", "veth", "peer", "name", self.interface, "netns", name)
            self._ip("link", "set", veth, "master", self.interface)
            self._ip("link", "set", veth, "up")
            self._ip("-n", name, "addr", "add", f"{address}/24", "dev", self.interface)
            self._ip("-n", name, "link", "set", self.interface, "up")
            self._ip("-n", name, "link", "set", "lo", "up")
        if self.rate_bits:
            self.shape(self.rate_bits)
        return self

    def shape(self, rate_bits):
        """Limits every host's link to ``rate_bits`` bits/s in each direction (tbf on the
        veth's egress here and on the host's interface egress in its namespace)."""
        for name, veth in zip(self.names, self._veths):
            _run(tbf_words(veth, rate_bits))
            _run(tbf_words(self.interface, rate_bits, netns=name))
        self.rate_bits = rate_bits

    def destroy(self):
        """Removes the links, the bridge and the namespaces (never raises)."""
        try:
            tool("ip")
        except FileNotFoundError:
            return  # create() made nothing
        for words in ([["link", "del", v] for v in self._veths] + [["link", "del", self.interface]]
                      + [["netns", "del", n] for n in self.names]):
            _run(["ip", *words], check=False)

    def launch_args(self, ranks_per_host, own_hostnames=False):
        """tfringrun arguments that place ``ranks_per_host`` ranks on each host. With
        ``own_hostnames`` every host's processes also run in their own UTS namespace whose
        hostname is the host's name (``unshare --uts``), so messages that name a rank's
        host (``rank 2 (host tfr...h1)``) tell the emulated hosts apart."""
        return ["-H", ",".join(f"{n}:{ranks_per_host}" for n in self.names), "--network-interface",
                self.interface, "--remote-command", remote_command(own_hostnames)]

    def __enter__(self):
        try:
            return self.create()
        except BaseException:
            self.destroy()
            raise

    def __exit__(self, *exc):
        self.destroy()


def remote_command(own_hostnames=False):
    """tfringrun's ``--remote-command`` that starts a rank "on" an emulated host: in its
    network namespace, and with ``own_hostnames`` in a UTS namespace named like the host."""
    ip = tool("ip")  # the workers' PATH may lack /usr/sbin
    if own_hostnames:
        return ip + " netns exec {host} unshare --uts sh -c 'hostname \"$0\" && exec sh -c \"$1\"' {host} {command}"
    return ip + " netns exec {host} sh -c {command}"


def cleanup(prefix=LAB_PREFIX):
    """Deletes every namespace and link whose name starts with ``prefix`` followed by a
    5-hex-digit tag (what NetnsHosts makes); returns the names removed."""
    pattern = re.compile(rf"^{re.escape(prefix)}[0-9a-f]{{5}}(h\d+|v\d+)?$")
    removed = []
    links = _run(["ip", "-o", "link", "show"], check=False).stdout
    for line in links.splitlines():
        name = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if pattern.match(name):
            _run(["ip", "link", "del", name], check=False)
            removed.append(name)
    for line in _run(["ip", "netns", "list"], check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if pattern.match(name):
            _run(["ip", "netns", "del", name], check=False)
            removed.append(name)
    return removed


def main():
    parser = argparse.ArgumentParser(description="Remove the scale lab's emulated hosts left by an interrupted run.")
    parser.add_argument("--cleanup", action="store_true", required=True)
    parser.add_argument("--prefix", default=LAB_PREFIX, help=f"name prefix (default {LAB_PREFIX}, the lab's)")
    args = parser.parse_args()
    removed = cleanup(args.prefix)
    print(f"removed {len(removed)}: {' '.join(removed)}" if removed else "nothing to remove")


if __name__ == "__main__":
    main()
