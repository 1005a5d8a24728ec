"""tfring.tensorflow collectives on 2 and 3 real processes: one worker per job runs every
op x dtype x reduce op (rank-dependent shapes, eager and tf.function) against NumPy, every
gradient against its analytic value, compression, IndexedSlices, DistributedGradientTape,
retracing, variables/objects and a tf.compat.v1 session (tests/workers/tf_collectives.py)."""

import os

import pytest

from tests.helpers import run_job

pytest.importorskip("tensorflow")

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers")


def run_worker(name, np_, *done_lines, timeout=120, env=None):
    """Runs tests/workers/<name> on np_ ranks (``env``: extra environment); every rank must
    print every done line (``{r}`` stands for its rank)."""
    with open(os.path.join(WORKERS, name)) as f:
        result = run_job(np_, f.read(), timeout=timeout, env=env)
    for r in range(np_):
        for line in done_lines:
            assert line.format(r=r) in result.stdout, result.stdout
    return result


@pytest.mark.multiprocess
@pytest.mark.timeout(150)
@pytest.mark.parametrize("np_", [2, 3])
def test_every_collective_dtype_op_and_gradient_matches_numpy(np_):
    run_worker("tf_collectives.py", np_, "rank {r}: tf collectives OK")
