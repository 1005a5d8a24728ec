"""Local (unsynchronized) variables at np=2 and np=3 (tests/workers/local_variables.py):
PartialDistributedGradientTape, register_local_source, PartialDistributedOptimizer,
register_local_var, scale_local_gradients and BroadcastGlobalVariablesCallback(local_variables=),
in eager and tf.function, with Keras 3 variables."""

import os

import pytest

from tests.helpers import run_job

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers", "local_variables.py")


@pytest.mark.multiprocess
@pytest.mark.parametrize("np_", [2, 3])
def test_local_variables_keep_their_rank_gradient_and_value(np_):
    with open(WORKER) as f:
        result = run_job(np_, f.read(), timeout=120)
    for rank in range(np_):
        assert f"OK {rank}" in result.stdout, result.stdout


def test_local_layers_must_be_layers():
    pytest.importorskip("tfring.tensorflow")
    import keras
    import tensorflow as tf

    import tfring.keras as hvd
    import tfring.tensorflow as hvd_tf

    with pytest.raises(ValueError, match="local_layers must be Keras layers. Received: str"):
        hvd_tf.PartialDistributedGradientTape(tf.GradientTape(), local_layers=["dense"])
    with pytest.raises(ValueError, match="local_layers must be Keras layers"):
        hvd.PartialDistributedOptimizer(keras.optimizers.SGD(), local_layers=[1])
