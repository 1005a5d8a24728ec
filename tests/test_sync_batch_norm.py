"""tfring.keras.SyncBatchNormalization at np=2 and np=3: outputs, input/gamma/beta
gradients, moving statistics and inference equal Keras' BatchNormalization on the global
batch in one process, in eager and tf.function; masks; fit, save and load
(tests/workers/sync_batch_norm.py)."""

import os

import pytest

from tests.helpers import run_job

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers", "sync_batch_norm.py")


@pytest.mark.multiprocess
@pytest.mark.parametrize("np_", [2, 3])
def test_sync_batch_norm_equals_batch_norm_on_the_global_batch(np_, tmp_path):
    with open(WORKER) as f:
        result = run_job(np_, f.read(), timeout=120, script_args=(str(tmp_path),))
    for rank in range(np_):
        assert f"OK {rank}" in result.stdout, result.stdout
