"""RingStrategy with real processes: 2 ranks with global batch B must train like 1 rank with
batch B (fit and a custom loop), evaluate()/predict() global and equal on every rank,
synchronized BatchNorm, collectives, input contexts, summaries, checkpoints, XLA, mixed
precision (tests/workers/strategy_checks.py runs them all in one job per world size: a
TensorFlow process costs ~5 s and ~500 MB); and a rank raising inside strategy.run ends the
job fast."""

import importlib.util
import os
import time

import numpy as np
import pytest

from tests.helpers import run_job

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers")

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.skipif(
        importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("tfring.tensorflow") is None,
        reason="needs TensorFlow and the TF op library (tfring.tensorflow)",
    ),
]

# Measured: |2 ranks - 1 rank| <= 1.2e-7 absolute on weights, losses, metrics, predictions
# and BatchNorm statistics (float32; only the summation order differs); <= 1.1e-5 absolute
# (1e-3 relative) on mixed-precision weights (float16 gradients summed in another order).
ATOL, RTOL = 2e-6, 1e-5
MIXED_ATOL, MIXED_RTOL = 1e-4, 1e-2


def _worker(name):
    with open(os.path.join(WORKERS, name)) as f:
        return f.read()


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """``{1: npz of the 1-rank run, 2: npz of the 2-rank run}`` of strategy_checks.py."""
    out = {}
    for np_ in (1, 2):
        path = tmp_path_factory.mktemp(f"strategy_np{np_}")
        result = run_job(np_, _worker("strategy_checks.py"), script_args=(str(path),), timeout=150)
        for r in range(np_):
            assert f"rank {r}: strategy checks OK" in result.stdout, result.stdout + result.stderr
        out[np_] = dict(np.load(path / f"result_np{np_}.npz"))
        out[np_]["stdout"] = result.stdout
    return out


def _close(results, key, atol=ATOL, rtol=RTOL):
    one, two = results[1][key], results[2][key]
    assert one.shape == two.shape, (one.shape, two.shape)
    np.testing.assert_allclose(two, one, atol=atol, rtol=rtol, err_msg=f"{key}: 2 ranks vs 1 rank")


@pytest.mark.timeout(330)
def test_every_check_passes_on_every_rank(results):
    for what in ["cluster resolver: rank 0 is the chief", "variables start equal", "fit", "evaluate equal on all ranks", "predict returns every row in order",
                 "custom loop", "synchronized batch norm", "reduce / gather / all_reduce / all_gather",
                 "variables created in tf.function start equal", "input contexts",
                 "summaries from rank 0 only", "checkpoints", "random states differ per rank",
                 "DistributedOptimizer under the strategy", "XLA", "mixed precision"]:
        for r in range(2):
            assert f"rank {r}: {what} OK" in results[2]["stdout"], what


@pytest.mark.timeout(330)
def test_fit_with_global_batch_equals_one_process(results):
    _close(results, "fit_weights")
    _close(results, "fit_loss")  # history: loss, val_loss, accuracy per epoch


@pytest.mark.timeout(330)
def test_custom_loop_equals_one_process(results):
    _close(results, "loop_weights")
    _close(results, "loop_losses")
    _close(results, "loop_accuracy")


@pytest.mark.timeout(330)
def test_evaluate_and_predict_are_global(results):
    _close(results, "evaluate")
    _close(results, "predict")


@pytest.mark.timeout(330)
def test_synchronized_batchnorm_uses_global_statistics(results):
    _close(results, "bn_stats")


@pytest.mark.timeout(330)
def test_mixed_precision_trains_like_one_process(results):
    _close(results, "mixed_precision_weights", MIXED_ATOL, MIXED_RTOL)


RAISES = """
import time
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
import tfring

strategy = tfring.RingStrategy()
rank = tfring.rank()
for step in range(5):
    def fn():
        if rank == 1 and step == 2:
            raise RuntimeError("rank 1 fails inside strategy.run")
        return tf.distribute.get_replica_context().all_reduce("SUM", tf.constant(1.0))
    print(f"rank {rank} step {step}: {float(strategy.run(fn))}", flush=True)
    if step == 1:
        print(f"rank {rank} entering the failing step at {time.time():.3f}", flush=True)
time.sleep(60)
"""


@pytest.mark.timeout(120)
def test_rank_raising_inside_run_fails_the_job_fast():
    result = run_job(2, RAISES, timeout=90, check=False)
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    assert "rank 1 fails inside strategy.run" in out, out
    assert "rank 0 step 1: 2.0" in out, out
    assert "rank 0 step 2" not in out, out
    entered = [float(line.rsplit(" ", 1)[1]) for line in result.stdout.splitlines() if "entering the failing" in line]
    assert entered, out
    assert time.time() - min(entered) < 20, f"the job took {time.time() - min(entered):.1f} s to stop\n{out}"
