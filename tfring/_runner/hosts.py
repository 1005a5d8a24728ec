"""Hosts and the slot plan: which rank runs where, and its local/cross place in the job.

Hosts come from ``-H host1:2,host2:2``, a hostfile (lines ``host slots=N``) or, with
neither, ``localhost`` with ``-np`` slots. Ranks fill the hosts in the order given, host
by host, so ranks on one host are consecutive. Only hosts that receive a rank count as
hosts of the job (cross_size).

Pure functions, no I/O except reading the hostfile; errors are ``ValueError`` with a
message meant for the user.
"""

import dataclasses
import re
import socket

from tfring._runner.rendezvous import rank_identities

_HOST_RE = re.compile(r"^[A-Za-z0-9_.\-\[\]:]+$")


@dataclasses.dataclass(frozen=True)
class Host:
    name: str
    slots: int


@dataclasses.dataclass(frozen=True)
class Slot:
    """One rank of the job and where it runs."""

    host: str
    rank: int
    size: int
    local_rank: int
    local_size: int
    cross_rank: int
    cross_size: int

    def env(self):
        """The identity variables of this rank (TFRING_RANK ... TFRING_CROSS_SIZE)."""
        return {
            "TFRING_RANK": str(self.rank),
            "TFRING_SIZE": str(self.size),
            "TFRING_LOCAL_RANK": str(self.local_rank),
            "TFRING_LOCAL_SIZE": str(self.local_size),
            "TFRING_CROSS_RANK": str(self.cross_rank),
            "TFRING_CROSS_SIZE": str(self.cross_size),
        }


def _host(name, slots_text, where):
    if not name or not _HOST_RE.match(name):
        raise ValueError(f"{where}: invalid host name. Received: {name!r}")
    try:
        slots = int(slots_text)
    except ValueError:
        raise ValueError(f"{where}: slots must be a positive integer. Received: {slots_text!r}") from None
    if slots < 1:
        raise ValueError(f"{where}: slots must be a positive integer. Received: {slots_text!r}")
    return Host(name, slots)


def _check_unique(hosts, where):
    seen = set()
    for h in hosts:
        if h.name in seen:
            raise ValueError(f"{where}: host {h.name!r} is listed twice; give it once with all its slots")
        seen.add(h.name)
    if not hosts:
        raise ValueError(f"{where}: no hosts given")
    return hosts


def parse_hosts(text):
    """Parses ``-H`` text: ``host[:slots],host[:slots],...`` (slots default to 1).

    Raises:
      ValueError: empty list, bad host name, bad slot count, or a host listed twice.
    """
    hosts = [parse_host_item(item.strip(), 1, f"-H {text}") for item in text.split(",") if item.strip()]
    return _check_unique(hosts, f"-H {text}")


def parse_host_item(item, default_slots, where):
    """``Host`` from ``host`` or ``host:slots`` (a bare IPv6 address has no slots; bracket
    it to give some). Raises ValueError naming ``where``."""
    name, sep, slots = item.rpartition(":")
    if not sep or (":" in name and not name.startswith("[")):
        name, slots = item, str(default_slots)
    return _host(name, slots, where)


def parse_hostfile(path):
    """Reads a hostfile: one ``host [slots=N]`` per line; ``#`` starts a comment.

    Raises:
      ValueError: unreadable file or a malformed line (the message names file and line).
    """
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ValueError(f"--hostfile {path}: cannot read it: {e.strerror}") from None
    hosts = []
    for number, line in enumerate(lines, 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        where = f"--hostfile {path}, line {number}"
        slots = "1"
        for field in fields[1:]:
            key, sep, value = field.partition("=")
            if key not in ("slots", "max_slots") or not sep:
                raise ValueError(f"{where}: expected 'host slots=N'. Received: {line.strip()!r}")
            if key == "slots":
                slots = value
        hosts.append(_host(fields[0], slots, where))
    return _check_unique(hosts, f"--hostfile {path}")


def plan(hosts, num_proc=None):
    """Assigns ranks to host slots.

    Args:
      hosts: list of ``Host``; None means this machine with ``num_proc`` slots.
      num_proc: number of ranks; None means every slot of ``hosts``.

    Returns:
      list of ``Slot``, indexed by rank.

    Raises:
      ValueError: ``num_proc`` below 1 or above the number of slots.
    """
    if hosts is None:
        if num_proc is None:
            raise ValueError("give the number of processes with -np N (or hosts with -H / --hostfile)")
        hosts = [Host("localhost", num_proc)]
    total = sum(h.slots for h in hosts)
    if num_proc is None:
        num_proc = total
    if num_proc < 1:
        raise ValueError(f"-np must be at least 1. Received: {num_proc}")
    if num_proc > total:
        listed = ",".join(f"{h.name}:{h.slots}" for h in hosts)
        raise ValueError(f"-np {num_proc} needs {num_proc} slots but the hosts have {total} ({listed})")
    counts = []
    left = num_proc
    for h in hosts:
        n = min(h.slots, left)
        if n:
            counts.append((h.name, n))
        left -= n
    return slots_of([name for name, n in counts for _ in range(n)])


def slots_of(host_of_rank):
    """``[Slot]`` by rank for ``host_of_rank[r]``, the host of rank r (``rank_identities``)."""
    return [Slot(host=host, rank=int(ids["TFRING_RANK"]), size=int(ids["TFRING_SIZE"]),
                 local_rank=int(ids["TFRING_LOCAL_RANK"]), local_size=int(ids["TFRING_LOCAL_SIZE"]),
                 cross_rank=int(ids["TFRING_CROSS_RANK"]), cross_size=int(ids["TFRING_CROSS_SIZE"]))
            for host, ids in zip(host_of_rank, rank_identities(host_of_rank))]


def is_local(host):
    """True when ``host`` names this machine (localhost, a loopback address, its hostname)."""
    name = host.strip("[]").lower()
    if name in ("localhost", "::1") or name.startswith("127."):
        return True
    own = {socket.gethostname().lower()}
    try:
        own.add(socket.getfqdn().lower())
    except OSError:
        pass
    short = {o.split(".")[0] for o in own}
    return name in own or ("." not in name and name in short)
