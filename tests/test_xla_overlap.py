"""The overlap of gradient allreduces with the backward pass in an XLA-compiled Keras step
(issue 41), asserted from the order of recorded events, never from durations: rank 0's
tfring timeline (each start/done pair's XLA_START, XLA_IN_FLIGHT and XLA_DONE spans,
cc/tf/xla/inflight.cc) and XLA's own thunk trace (TF profiler), both read by
tools/xla_trace.py (which benchmarks/xla_overlap.py measures with)."""

import pytest

from tests.helpers import run_job

pytest.importorskip("tensorflow")

# Keras fit, jit_compile=True, np=2, a 3-layer MLP whose 6 gradients are 6 buckets
# (bucket_bytes=1): 6 start/done pairs per step. Rank 0 checks every step of the timeline.
OVERLAP_IN_COMPILED_FIT = """
import glob, json, os, tempfile
import numpy as np
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
import keras
import tfring.keras as hvd
from tools.xla_trace import hlo_order, overlap_per_step, steps, xla_thunks, xla_overlap_per_step

hvd.init()
keras.utils.set_random_seed(0)
model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, activation="relu"),
                          keras.layers.Dense(128, activation="relu"), keras.layers.Dense(10)])
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.01), bucket_bytes=1), loss=loss_fn,
              jit_compile=True)
rng = np.random.default_rng(hvd.rank())
x = rng.standard_normal((32 * 6, 64), dtype=np.float32)
y = rng.integers(0, 10, 32 * 6).astype(np.int32)
model.fit(x[:64], y[:64], batch_size=32, verbose=0)  # compile
tmp = tempfile.mkdtemp()
path = os.path.join(tmp, "t.json")
hvd.start_timeline(path)
tf.profiler.experimental.start(os.path.join(tmp, f"prof{hvd.rank()}"))
model.fit(x, y, batch_size=32, verbose=0, shuffle=False)
tf.profiler.experimental.stop()
hvd.stop_timeline()
assert model.jit_compile is True
if hvd.rank() == 0:
    with open(path) as f:
        events = json.load(f)
    compiled, _ = steps(events)
    assert len(compiled) == 6, [len(s) for s in compiled]
    for step in compiled:
        assert len(step) == 6, step
        # Each pair: the start call began before it returned and before the core completed
        # the group; the done call came after the start call returned (one XLA thread runs
        # both), and its future was told after the core completed and after it was awaited.
        # The core may complete a group before its start call returns (the calling thread
        # descheduled after the enqueue): `submitted` and `completed` are not ordered.
        for g in step:
            assert g["start"] <= g["submitted"] <= g["awaited"] <= g["told"], step
            assert g["start"] <= g["completed"] <= g["told"], step
        # The first bucket (the last layer's gradients) was submitted before the last start
        # call, whose operands are the backward pass's last gradients, began.
        assert step[0]["submitted"] <= step[-1]["start"], step
    rows = overlap_per_step(events)
    assert len(rows) == 5, rows
    # XLA's thunk trace: in every step, a dot of the backward pass ran after the first
    # start call had returned and before the last one began: an allreduce was submitted
    # before the backward pass's last gradient existed.
    xspace = glob.glob(os.path.join(tmp, "prof0", "**", "*.xplane.pb"), recursive=True)[0]
    executions = [e for e in xla_thunks(xspace) if any(t[0].startswith("DistributedOptimizer_") for t in e["thunks"])]
    assert len(executions) == 6, len(executions)
    for e in executions:
        calls = [t for t in e["thunks"] if t[0].startswith("DistributedOptimizer_")]
        assert len(calls) == 12, calls
        first_start = calls[0]
        starts = {}
        for name, b, _, _ in calls:
            starts.setdefault(name.rsplit(".", 1)[0], b)
        last_start = max(starts.values())
        dots = [t for t in e["thunks"] if "MatMul" in t[0] and first_start[2] <= t[1] < last_start]
        assert dots, e["thunks"]
    per_step = xla_overlap_per_step(executions, "DistributedOptimizer_")
    assert all(r["buckets"] == 6 and 0 <= r["overlap_backward_ms"] <= r["overlap_ms"] <= r["in_flight_ms"]
               for r in per_step), per_step
    order = hlo_order(tf, model, loss_fn, tf.constant(x[:32]), tf.constant(y[:32]))
    assert order["starts"] == 6 and order["starts_before_last_dot"] >= 1, order
    assert order["dots_after_last_start"] == 0, order
    print("OVERLAP", per_step[-1], order)
print(f"rank {hvd.rank()}: overlap OK")
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(150)
def test_compiled_keras_step_starts_allreduces_before_the_backward_pass_ends():
    result = run_job(2, OVERLAP_IN_COMPILED_FIT, timeout=120)
    for r in range(2):
        assert f"rank {r}: overlap OK" in result.stdout, result.stdout + result.stderr
