"""Addresses for a job that spans hosts: the address of a named network interface, and the
address this machine uses to reach another host.

Used by the launcher (where to serve the store), by the remote bootstrap (which address a
remote worker binds and advertises) and by ``tfring._basics.environment_discovery`` (where rank 0
serves the store under mpirun); ``tfring._runner.network`` re-exports it under that path. IPv4 only, Linux only (``SIOCGIFADDR``), no subprocesses.

Errors are ``ValueError`` with a message meant for the user.
"""

import fcntl
import socket
import struct

_SIOCGIFADDR = 0x8915


def interface_names():
    """Names of this machine's network interfaces (in this network namespace)."""
    try:
        return [name for _, name in socket.if_nameindex()]
    except OSError:
        return []


def interface_address(name):
    """The IPv4 address of interface ``name`` on this machine, e.g. ``"10.0.0.5"``.

    Raises:
      ValueError: no such interface, or it has no IPv4 address (the message lists the
        interfaces that exist).
    """
    if not name or len(name) >= 16 or "/" in name:
        raise ValueError(f"invalid network interface name. Received: {name!r}")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            packed = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, struct.pack("256s", name.encode()))
        except OSError as e:
            known = ", ".join(interface_names()) or "none found"
            why = "no such interface" if name not in interface_names() else "it has no IPv4 address"
            raise ValueError(f"network interface {name!r} on {socket.gethostname()}: {why} "
                             f"({e.strerror}); interfaces here: {known}") from None
    return socket.inet_ntoa(packed[20:24])


def route_source_address(host):
    """The local IPv4 address this machine would use to reach ``host``, or None when
    ``host`` does not resolve or no route leads there. Sends nothing (a UDP socket's
    ``connect`` only picks the route)."""
    try:
        infos = socket.getaddrinfo(host.strip("[]"), 9, socket.AF_INET, socket.SOCK_DGRAM)
    except (OSError, UnicodeError):
        return None
    for *_, sockaddr in infos:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.connect(sockaddr)
                return s.getsockname()[0]
            except OSError:
                continue
    return None


def own_address():
    """This machine's address by its host name, or None when that is only a loopback
    address (``127.*``) or does not resolve."""
    try:
        address = socket.gethostbyname(socket.gethostname())
    except OSError:
        return None
    return None if address.startswith("127.") else address


def reachable_address(peers):
    """An address of this machine that the hosts ``peers`` can be expected to reach: the
    source address of the route to the first peer that resolves, else ``own_address()``.

    Raises:
      ValueError: neither works (the message says to name an interface).
    """
    for peer in peers:
        address = route_source_address(peer)
        if address and not address.startswith("127."):
            return address
    address = own_address()
    if address:
        return address
    raise ValueError(f"cannot tell which address of {socket.gethostname()} the hosts "
                     f"{', '.join(peers)} can reach (their names do not resolve here and this "
                     "machine's name resolves only to a loopback address); name the interface "
                     "with --network-interface IFACE")
