"""The job's store (served by tfringrun) only talks to holders of the job secret: wrong
secrets, garbage and oversized frames are refused and counted, and the store keeps serving
the rightful clients throughout."""

import hashlib
import secrets
import socket
import struct
import time

import pytest

from tests import store_protocol
from tfring import _core
from tfring import _errors as errors

HOST = "127.0.0.1"


@pytest.fixture
def store():
    secret = secrets.token_hex(32)
    server = _core.StoreServer(HOST, 0, secret)
    client = _core.StoreClient(HOST, server.port, secret, 5.0)
    try:
        yield server, client, secret
    finally:
        server.stop()


def _refused_reaches(server, count, timeout=5.0):
    deadline = time.monotonic() + timeout
    while server.refused_connections < count and time.monotonic() < deadline:
        time.sleep(0.01)
    return server.refused_connections


def _closed_by_server(sock, timeout=5.0):
    """True when the server closes ``sock`` within ``timeout`` (whatever it sent first)."""
    sock.settimeout(timeout)
    try:
        while sock.recv(4096):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def _check_serves(client, key="alive"):
    client.set(key, b"yes")
    assert client.get(key, 5.0) == b"yes"


@pytest.mark.timeout(60)
def test_wrong_secret_is_refused_and_counted_while_the_right_one_works(store):
    server, client, secret = store
    client.set("model/step", b"7")
    before = server.refused_connections
    t0 = time.monotonic()
    with pytest.raises(errors.PreconditionError, match="TFRING_SECRET"):
        _core.StoreClient(HOST, server.port, secrets.token_hex(32), 5.0)
    assert time.monotonic() - t0 < 3  # refused at once, not retried until the timeout
    assert _refused_reaches(server, before + 1) == before + 1
    # The existing client and a new one with the right secret are unaffected.
    assert client.get("model/step", 5.0) == b"7"
    assert client.add("counter", 2) == 2
    other = _core.StoreClient(HOST, server.port, secret, 5.0)
    assert other.add("counter", 3) == 5
    assert other.get("model/step", 5.0) == b"7"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("garbage", [hashlib.sha512(b"seed").digest(), b"\x00" * 48,
                                     b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"], ids=["random", "zeros", "http"])
def test_garbage_is_refused_and_the_store_keeps_serving(store, garbage):
    server, client, _ = store
    before = server.refused_connections
    sock = socket.create_connection((HOST, server.port), timeout=5.0)
    try:
        sock.sendall(garbage)
        if len(garbage) < 48:  # shorter than a handshake reply: the server would wait 10 s for more
            sock.shutdown(socket.SHUT_WR)
        assert _closed_by_server(sock)
    finally:
        sock.close()
    assert _refused_reaches(server, before + 1) == before + 1
    _check_serves(client)


@pytest.mark.timeout(60)
def test_a_request_without_the_handshake_changes_nothing(store):
    server, client, _ = store
    client.set("weights", b"original")
    before = server.refused_connections
    sock = socket.create_connection((HOST, server.port), timeout=5.0)
    try:
        assert store_protocol.recv_exact(sock, 20)[:4] == b"TFR1"  # the server's challenge
        sock.sendall(store_protocol.frame(store_protocol.set_request("weights", b"forged")) * 3)
        assert _closed_by_server(sock)
    finally:
        sock.close()
    assert _refused_reaches(server, before + 1) == before + 1
    assert client.get("weights", 5.0) == b"original"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("length", [0xFFFFFFFF, 1 << 31, (64 << 20) + 1])
def test_an_authenticated_client_announcing_a_huge_frame_is_dropped(store, length):
    server, client, secret = store
    client.set("k", b"v")
    sock = store_protocol.connect(server.port, secret, timeout=5.0)
    try:
        sock.sendall(struct.pack("<I", length) + b"x" * 16)
        assert _closed_by_server(sock), "the server kept a client that announced a huge frame"
    finally:
        sock.close()
    assert client.get("k", 5.0) == b"v"
    _check_serves(_core.StoreClient(HOST, server.port, secret, 5.0), key="after")


@pytest.mark.timeout(60)
def test_a_silent_client_does_not_block_others(store):
    server, client, secret = store
    idle = socket.create_connection((HOST, server.port), timeout=5.0)  # never answers the challenge
    try:
        t0 = time.monotonic()
        _check_serves(_core.StoreClient(HOST, server.port, secret, 5.0))
        _check_serves(client)
        assert time.monotonic() - t0 < 2
    finally:
        idle.close()
