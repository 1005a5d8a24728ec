"""Seeded, short fuzz runs of the coordinator wire format and the store protocol (the long
run is tests/measure/fuzz_protocols.py). Nothing may crash or hang; garbage is refused."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import fuzz_targets
from tfring import _core

SEEDED = settings(derandomize=True, deadline=None, max_examples=300,
                  suppress_health_check=[HealthCheck.too_slow])


@SEEDED
@given(st.binary(max_size=512))
def test_decode_control_never_crashes_on_random_bytes(data):
    fuzz_targets.decode_control(data)


VALID = _core._encode_requests(["grad/dense/kernel", "grad/dense/bias"])


def test_valid_message_decodes():
    assert fuzz_targets.decode_control(VALID)
    assert not fuzz_targets.decode_control(VALID[:-1])  # truncated
    assert not fuzz_targets.decode_control(VALID + b"x")  # trailing bytes


@SEEDED
@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=8),
       st.integers(0, len(VALID)))
def test_decode_control_never_crashes_on_mutated_messages(flips, cut):
    fuzz_targets.decode_control(fuzz_targets.mutate(VALID, flips)[:cut])


@pytest.fixture(scope="module")
def store_fuzzer():
    fuzzer = fuzz_targets.StoreFuzzer()
    yield fuzzer
    fuzzer.close()


@settings(derandomize=True, deadline=None, max_examples=60, suppress_health_check=list(HealthCheck))
@given(st.binary(max_size=64))
def test_store_survives_authenticated_garbage_frames(store_fuzzer, payload):
    store_fuzzer.send_frame(payload)


@settings(derandomize=True, deadline=None, max_examples=20, suppress_health_check=list(HealthCheck))
@given(st.binary(min_size=1, max_size=96))
def test_store_refuses_unauthenticated_garbage(store_fuzzer, data):
    before = store_fuzzer.server.refused_connections
    store_fuzzer.send_unauthenticated(data)
    assert store_fuzzer.server.refused_connections >= before  # counted once the handshake fails


def test_store_drops_a_client_announcing_a_huge_frame(store_fuzzer):
    sock = __import__("tests.store_protocol", fromlist=["x"]).connect(store_fuzzer.server.port, store_fuzzer.secret)
    try:
        sock.sendall(b"\xff\xff\xff\xff")  # 4 GiB frame announced
        sock.settimeout(5.0)
        assert sock.recv(1) == b""  # the server closed the connection
    finally:
        sock.close()
    store_fuzzer.check_alive()
