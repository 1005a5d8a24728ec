"""Jobs formed without tfringrun (issue 17, items 1-3): the public rendezvous API
(tfring.runner.Store, rank_identities), tfring.shutdown(reason), and N processes started by
hand from environment variables alone with rank 0 serving the store (TFRING_STORE_SERVE=1),
as a Kubernetes Indexed Job or Spark barrier tasks would start them."""

import socket
import subprocess
import sys
import time

import pytest

from tests.helpers import job_env
from tests.ports import unused_port
from tfring.runner import Store, rank_identities


def test_rank_identities_group_local_ranks_by_host():
    ids = rank_identities(["a", "b", "a", "c", "b"])  # not consecutive, as Ray may order them
    assert [(d["TFRING_LOCAL_RANK"], d["TFRING_LOCAL_SIZE"], d["TFRING_CROSS_RANK"]) for d in ids] == [
        ("0", "2", "0"), ("0", "2", "1"), ("1", "2", "0"), ("0", "1", "2"), ("1", "2", "1")]
    assert {d["TFRING_SIZE"] for d in ids} == {"5"} and {d["TFRING_CROSS_SIZE"] for d in ids} == {"3"}
    assert [d["TFRING_RANK"] for d in ids] == ["0", "1", "2", "3", "4"]
    with pytest.raises(ValueError, match="at least one"):
        rank_identities([])


def test_store_address_env_and_repr():
    with Store() as store:
        assert store.address == f"127.0.0.1:{store.port}" and store.port > 0
        assert store.env() == {"TFRING_STORE_ADDR": store.address, "TFRING_SECRET": store.secret}
        assert len(store.secret) == 64 and store.secret not in repr(store)
    assert store.stop() is True  # idempotent
    with Store(host="0.0.0.0", advertise="10.1.2.3", secret="ab" * 32) as store:
        assert store.address == f"10.1.2.3:{store.port}" and store.secret == "ab" * 32
    if socket.has_ipv6:
        try:
            store = Store(host="::1")
        except Exception as e:  # noqa: BLE001 - no IPv6 loopback in this container
            pytest.skip(f"no IPv6 loopback here: {e}")
        with store:
            assert store.address == f"[::1]:{store.port}"


def _start(script, env, *args):
    return subprocess.Popen([sys.executable, "-c", script, *args], env=job_env(env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _finish(procs, timeout):
    deadline = time.monotonic() + timeout
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            out = p.communicate()[0]
            outs.append(out)
            raise AssertionError("a rank hung:\n" + "\n---\n".join(outs)) from None
        outs.append(out)
    return outs


SHUTDOWN_WITH_REASON = """
import threading, numpy as np, tfring
tfring.init()
if tfring.rank() == 1:
    def train():  # like Ray's training function: runs in a thread, no excepthook
        try:
            raise ValueError("the data loader failed")
        except ValueError as e:
            tfring.shutdown(reason=f"{type(e).__name__}: {e}")
    t = threading.Thread(target=train)
    t.start()
    t.join()
else:
    try:
        tfring.allreduce(np.ones(2), name="never")
    except tfring.errors.AbortedError as e:
        print("ERR", e, flush=True)
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_shutdown_with_a_reason_tells_the_other_ranks_why():
    with Store() as store:
        procs = [_start(SHUTDOWN_WITH_REASON, {**ids, **store.env()}) for ids in rank_identities(["h", "h"])]
        outs = _finish(procs, 45)
    assert "rank 1 exited: ValueError: the data loader failed" in outs[0], outs
    assert all(p.returncode == 0 for p in procs), outs


TRAIN = """
import json, sys, numpy as np, tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
import keras, tfring.keras as hvd
hvd.init()
keras.utils.set_random_seed(hvd.rank())  # different starts: the broadcast must equalize them
rng = np.random.default_rng(hvd.rank())
x = rng.standard_normal((64, 4)).astype("float32")
y = x.sum(1, keepdims=True)
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)])
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.05)), loss="mse")
history = model.fit(x, y, batch_size=16, epochs=3, verbose=0,
                    callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
print("RESULT", json.dumps({"rank": hvd.rank(), "size": hvd.size(), "loss": history.history["loss"],
                            "weights": [w.tolist() for w in model.get_weights()]}), flush=True)
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(120)
def test_processes_started_by_hand_form_a_job_from_env_vars_alone():
    """Three processes with only TFRING_RANK/SIZE/STORE_ADDR/SECRET (+ TFRING_STORE_SERVE=1
    on rank 0): the store host given by name, one rank started 5 s late."""
    import json

    port = unused_port()
    common = {"TFRING_SIZE": "3", "TFRING_STORE_ADDR": f"localhost:{port}", "TFRING_SECRET": "5e" * 32,
              "TFRING_STORE_SERVE": "1", "TFRING_START_TIMEOUT_S": "60"}
    procs = [_start(TRAIN, {**common, "TFRING_RANK": "1"}), _start(TRAIN, {**common, "TFRING_RANK": "0"})]
    time.sleep(5.0)
    procs.append(_start(TRAIN, {**common, "TFRING_RANK": "2"}))
    outs = _finish(procs, 100)
    results = {}
    for out in outs:
        line = next((li for li in out.splitlines() if li.startswith("RESULT ")), None)
        assert line, "\n---\n".join(outs)
        res = json.loads(line[7:])
        results[res["rank"]] = res
    assert sorted(results) == [0, 1, 2] and {r["size"] for r in results.values()} == {3}
    for r in (1, 2):  # one model trained: identical weights on every rank
        assert results[r]["weights"] == results[0]["weights"]
    assert results[0]["loss"][-1] < results[0]["loss"][0]
    assert all(p.returncode == 0 for p in procs), "\n---\n".join(outs)


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_without_rank_0_the_others_time_out_naming_the_store():
    port = unused_port()
    env = {"TFRING_SIZE": "2", "TFRING_RANK": "1", "TFRING_STORE_ADDR": f"localhost:{port}",
           "TFRING_SECRET": "5e" * 32, "TFRING_START_TIMEOUT_S": "2"}
    script = "import tfring\ntry:\n    tfring.init()\nexcept tfring.errors.TfringError as e:\n    print('ERR', e)\n"
    t0 = time.monotonic()
    (out,) = _finish([_start(script, env)], 30)
    assert "ERR" in out and f"localhost:{port}" in out, out
    assert time.monotonic() - t0 < 20, out


HOMOGENEOUS = """
import tfring
tfring.init()
print("HOMOGENEOUS", tfring.rank(), tfring.is_homogeneous(), flush=True)
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
@pytest.mark.parametrize("cross_ranks, expected", [((0, 1), True), ((0, 0, 1), False), ((0, 1, 0, 1), True)])
def test_is_homogeneous_compares_the_ranks_of_every_host(cross_ranks, expected):
    """Hosts are told apart by TFRING_CROSS_RANK (as tfringrun -H numbers them)."""
    port = unused_port()
    size = len(cross_ranks)
    procs = []
    for rank, cross in enumerate(cross_ranks):
        local = [r for r, c in enumerate(cross_ranks) if c == cross]
        procs.append(_start(HOMOGENEOUS, {
            "TFRING_RANK": str(rank), "TFRING_SIZE": str(size), "TFRING_STORE_ADDR": f"127.0.0.1:{port}",
            "TFRING_SECRET": "ab" * 32, "TFRING_STORE_SERVE": "1", "TFRING_CROSS_RANK": str(cross),
            "TFRING_CROSS_SIZE": str(len(set(cross_ranks))), "TFRING_LOCAL_RANK": str(local.index(rank)),
            "TFRING_LOCAL_SIZE": str(len(local))}))
    outs = _finish(procs, 50)
    for rank, out in enumerate(outs):
        assert f"HOMOGENEOUS {rank} {expected}" in out, "\n---\n".join(outs)


EXIT_AFTER_INIT = """
import os, tfring
tfring.init()
print("INIT OK", tfring.rank(), flush=True)
if tfring.rank() == 0:
    os._exit(0)  # the store's server leaves at once
tfring.shutdown()
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(90)
def test_rank_0_serving_the_store_returns_from_init_only_after_every_rank_is_done_with_it():
    """With TFRING_STORE_SERVE=1 the store lives in rank 0: if init returned there before
    the others finished reading it, a rank 0 that exits at once cut them off (seen in CI)."""
    for attempt in range(5):
        port = unused_port()
        procs = [_start(EXIT_AFTER_INIT, {
            "TFRING_RANK": str(rank), "TFRING_SIZE": "4", "TFRING_STORE_ADDR": f"127.0.0.1:{port}",
            "TFRING_SECRET": "cd" * 32, "TFRING_STORE_SERVE": "1", "TFRING_CROSS_RANK": str(rank % 2),
            "TFRING_CROSS_SIZE": "2", "TFRING_LOCAL_RANK": str(rank // 2), "TFRING_LOCAL_SIZE": "2"})
            for rank in range(4)]
        outs = _finish(procs, 15)
        for rank, out in enumerate(outs):
            assert f"INIT OK {rank}" in out, f"attempt {attempt}:\n" + "\n---\n".join(outs)
