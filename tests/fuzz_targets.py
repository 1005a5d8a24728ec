"""Fuzz targets shared by the seeded CI run (tests/test_fuzz.py) and the long benchmark-style
run (tests/measure/fuzz_protocols.py). Each target must never crash or hang the process under
test; a malformed input must be refused cleanly."""

import socket

from tests import store_protocol
from tfring import _core


def decode_control(data: bytes):
    """The coordinator wire format: any bytes decode to (ok, message) without crashing."""
    ok, message = _core._decode_control(data, 3)
    if not ok:
        assert "malformed coordinator message" in message, message
    return ok


def mutate(seed: bytes, flips):
    """Applies (position, byte) flips and truncation to a valid message."""
    data = bytearray(seed)
    for pos, value in flips:
        if data:
            data[pos % len(data)] = value
    return bytes(data)


class StoreFuzzer:
    """Sends authenticated garbage frames to a live StoreServer and checks it still serves."""

    def __init__(self):
        self.secret = "fuzz-secret"
        self.server = _core.StoreServer("127.0.0.1", 0, self.secret)
        self.client = _core.StoreClient("127.0.0.1", self.server.port, self.secret, 5.0)

    def send_frame(self, payload: bytes, raw_prefix: bytes = b""):
        sock = store_protocol.connect(self.server.port, self.secret, timeout=5.0)
        try:
            sock.sendall(raw_prefix + store_protocol.frame(payload))
            sock.settimeout(0.5)
            try:
                sock.recv(4096)  # a reply (valid command) or EOF (refused)
            except (socket.timeout, ConnectionError):
                pass  # e.g. GET of a missing key waits: the server is still fine
        finally:
            sock.close()
        self.check_alive()

    def send_unauthenticated(self, data: bytes):
        sock = socket.create_connection(("127.0.0.1", self.server.port), timeout=5.0)
        try:
            sock.recv(20)
            sock.sendall(data)
            sock.settimeout(0.5)
            try:
                while sock.recv(4096):
                    pass
            except (socket.timeout, ConnectionError):
                pass
        finally:
            sock.close()
        self.check_alive()

    def check_alive(self):
        self.client.set("alive", b"yes")
        assert self.client.get("alive", 5.0) == b"yes"

    def close(self):
        self.server.stop()
