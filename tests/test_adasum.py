"""op=Adasum (issue 14): Horovod's adaptive summation on CPU tensors, through the NumPy API
at 4 ranks (cheap: no TensorFlow) and a refusal at 3, and through tfring.tensorflow and
tfring.keras at 2 ranks (allreduce eager and in a tf.function, grouped_allreduce, the
gradient, DistributedGradientTape, the Keras DistributedOptimizer, the refusals). The core's
algorithm is tested at 1, 2, 4 and 8 ranks in cc/tests/adasum_test.cc."""

import pytest

from tests.test_tf_collectives import run_worker


@pytest.mark.multiprocess
@pytest.mark.timeout(120)
@pytest.mark.parametrize("np_", [4, 3])
def test_numpy_adasum_matches_the_reference_or_is_refused(np_):
    run_worker("adasum_numpy.py", np_, "rank {r}: adasum numpy OK", timeout=90)


@pytest.mark.multiprocess
@pytest.mark.timeout(150)
def test_tensorflow_and_keras_adasum():
    pytest.importorskip("tensorflow")
    run_worker("adasum_tf.py", 2, "rank {r}: adasum tf OK", timeout=120)
