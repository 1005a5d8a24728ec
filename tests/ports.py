"""A TCP port for a test's own server that no other test or process is handed meanwhile.

``bind(("127.0.0.1", 0))`` returns a port from the kernel's ephemeral range, and closing the
socket gives it back: every other socket that binds port 0 or connects out (the other
pytest worker's jobs, their stores and data links) draws from the same range, so by the
time the test's server listens, the port can be taken. A CI run of the README's `make test`
failed that way: rank 0 could not listen ("Address already in use") and rank 1 connected to
whatever held it ("not a tfring server"). ``unused_port()`` picks at random below the
ephemeral range, where the kernel hands out nothing on its own, and checks the port is free
on every address.
"""

import random
import socket

_DEFAULT_EPHEMERAL_LOW = 32768
_LOWEST = 20000  # above the well-known and most registered service ports


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return _DEFAULT_EPHEMERAL_LOW


def unused_port(tries=200):
    """A port in [20000, the ephemeral range's start) that nothing listens on now (bound on
    0.0.0.0, so a listener on any address counts). Raises RuntimeError after `tries` ports."""
    high = max(_LOWEST + 1000, _ephemeral_low())
    rng = random.SystemRandom()
    for _ in range(tries):
        port = rng.randrange(_LOWEST, high)
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free TCP port in [{_LOWEST}, {high}) after {tries} tries")
