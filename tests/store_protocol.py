"""A minimal Python client of the store's wire protocol (cc/core/rendezvous/auth.h, tcp_store.h), used
to fuzz the server with frames the C++ client would never send."""

import hashlib
import hmac
import os
import socket
import struct


def handshake(sock, secret):
    """Runs the client side of the HMAC challenge-response; returns True if accepted."""
    hello = recv_exact(sock, 20)
    if hello[:4] != b"TFR1":
        return False
    ns, nc = hello[4:], os.urandom(16)
    key = secret.encode()
    sock.sendall(nc + hmac.new(key, b"client" + ns + nc, hashlib.sha256).digest())
    try:
        proof = recv_exact(sock, 32)
    except ConnectionError:
        return False
    return hmac.compare_digest(proof, hmac.new(key, b"server" + nc + ns, hashlib.sha256).digest())


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def frame(payload):
    return struct.pack("<I", len(payload)) + payload


def connect(port, secret, timeout=5.0):
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    if not handshake(sock, secret):
        sock.close()
        raise ConnectionError("handshake refused")
    return sock


def set_request(key, value):
    k, v = key.encode(), value
    return bytes([1]) + struct.pack("<I", len(k)) + k + struct.pack("<I", len(v)) + v
