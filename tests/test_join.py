"""hvd.join / tfring.join: ranks with uneven data. A rank out of data joins; the others go on,
the joined ranks adding zeros to their allreduces; every join returns the last rank to join.
Pinned at np=3 on the NumPy API and at np=2 in TF (eager and tf.function), against values
computed by hand."""

import pytest

from tests.helpers import run_job

NUMPY_SCRIPT = r"""
import time
import numpy as np
import tfring
from tfring import _errors as errors

tfring.init()
r, n = tfring.rank(), tfring.size()
for step in range(n - r):  # rank r has n - r batches
    got = tfring.allreduce(np.full(4, float(r + 1), np.float32), op=tfring.Sum, name=f"grad.{step}")
    expected = sum(p + 1 for p in range(n - step))  # ranks still with data at this step
    assert np.all(got == expected), (step, got, expected)
    avg = tfring.allreduce(np.full(2, float(r + 1), np.float64), op=tfring.Average, name=f"avg.{step}")
    assert np.allclose(avg, expected / n), (step, avg)  # a joined rank counts as zeros
    if r == 0:
        time.sleep(0.2)  # rank 0 has the most data and is the slowest: the last to join
if r == 0:
    try:  # rank n-1 has joined by now: only allreduce and barrier can run
        tfring.broadcast(np.zeros(3, np.float32), 0, name="weights")
        raise SystemExit("broadcast ran while a rank had joined")
    except errors.PreconditionError as e:
        assert "have joined" in str(e) and "broadcast" in str(e), e
last = tfring.join()
assert last == 0, last
whole = tfring.allreduce(np.ones(3, np.float32), op=tfring.Sum, name="after")  # everyone again
assert np.all(whole == n), whole
again = tfring.join()  # a second round of joins works the same
print("RANK-OK", r, last, again, flush=True)
tfring.shutdown()
"""

TF_SCRIPT = r"""
import numpy as np
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
import tfring.tensorflow as hvd

hvd.init()
r = hvd.rank()
batches = [[1.0, 2.0, 3.0], [10.0, 20.0]][r]  # rank 0 has one batch more

for mode in ("eager", "function"):
    w = tf.Variable(0.0)
    opt = tf.keras.optimizers.SGD(learning_rate=1.0)

    def step(x):
        with tf.GradientTape() as tape:
            loss = w * x  # d loss / d w = x
        tape = hvd.DistributedGradientTape(tape)
        (g,) = tape.gradient(loss, [w])
        opt.apply_gradients([(g, w)])
        return g

    run = tf.function(step) if mode == "function" else step
    grads = [float(run(tf.constant(x))) for x in batches]
    # Average over both ranks; rank 1 adds zeros to rank 0's third step.
    expected = [5.5, 11.0, 1.5][: len(batches)]
    assert np.allclose(grads, expected), (mode, grads, expected)
    last = hvd.join()
    assert int(last) == 0, (mode, last)
    hvd.broadcast_variables([w], root_rank=0)  # rank 0 holds the model trained on every batch
    assert float(w.numpy()) == -18.0, (mode, float(w.numpy()))
    print("MODE-OK", mode, r, flush=True)
print("RANK-OK", r, flush=True)
"""


@pytest.mark.multiprocess
def test_ranks_with_fewer_batches_join_and_the_others_reduce_without_them():
    result = run_job(3, NUMPY_SCRIPT, timeout=90)
    for r in range(3):
        assert f"RANK-OK {r} 0 " in result.stdout, result.stdout


@pytest.mark.multiprocess
@pytest.mark.timeout(150)
def test_hvd_join_with_a_gradient_tape_eager_and_in_a_tf_function():
    pytest.importorskip("tensorflow")
    result = run_job(2, TF_SCRIPT, timeout=120)
    for r in range(2):
        assert f"MODE-OK eager {r}" in result.stdout and f"MODE-OK function {r}" in result.stdout, result.stdout
