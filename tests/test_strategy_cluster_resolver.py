"""``RingStrategy.cluster_resolver`` (issue 28): scripts written for
``MultiWorkerMirroredStrategy`` read ``task_type`` / ``task_id`` or hand the resolver to TF's
``multi_worker_util`` to decide who writes; tfring answers from its rank and size with rank 0
as the chief, as TF does for a ``TF_CONFIG`` of workers only. Single process (the resolver
for any rank); the 2-rank strategy checks are in tests/workers/strategy_checks.py."""

import importlib.util

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("tfring.tensorflow") is None,
    reason="needs TensorFlow and the TF op library (tfring.tensorflow)",
)


@pytest.mark.parametrize("rank", [0, 1, 2])
def test_resolver_answers_like_tf_for_a_cluster_of_workers(rank):
    import tensorflow as tf
    from tensorflow.python.distribute import multi_worker_util

    from tfring._distribute.cluster_resolver import RingClusterResolver

    resolver = RingClusterResolver(rank, 3)
    assert isinstance(resolver, tf.distribute.cluster_resolver.ClusterResolver)
    assert (resolver.task_type, resolver.task_id, resolver.is_chief) == ("worker", rank, rank == 0)
    spec = resolver.cluster_spec()
    assert spec.as_dict() == {"worker": [f"rank{r}.tfring.invalid:0" for r in range(3)]}
    # TF's own helpers, as MultiWorkerMirroredStrategy and Keras' multi-worker code call them
    assert multi_worker_util.is_chief(spec, resolver.task_type, resolver.task_id) == (rank == 0)
    assert multi_worker_util.id_in_cluster(spec, resolver.task_type, resolver.task_id) == rank
    assert multi_worker_util.worker_count(spec, resolver.task_type) == 3
    # the same answer as MultiWorkerMirroredStrategy's resolver for TF_CONFIG with workers only
    tf_config = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec({"worker": ["a:1", "b:1", "c:1"]}), task_type="worker", task_id=rank)
    assert multi_worker_util.is_chief(tf_config.cluster_spec(), tf_config.task_type, tf_config.task_id) == (rank == 0)
    assert resolver.master() == "" and resolver.rpc_layer is None
    assert resolver.num_accelerators() == {}
    assert RingClusterResolver(rank, 3, {"GPU": 1}).num_accelerators() == {"GPU": 1}
    assert repr(resolver) == f"RingClusterResolver(task_type='worker', task_id={rank}, workers=3)"


def test_resolver_roles_cannot_be_reassigned_and_ranks_are_checked():
    from tfring._distribute.cluster_resolver import RingClusterResolver

    resolver = RingClusterResolver(1, 2)
    with pytest.raises(AttributeError, match=r"task_id is this process's rank \(1\)"):
        resolver.task_id = 0
    with pytest.raises(AttributeError, match="task_type is always 'worker'"):
        resolver.task_type = "chief"
    with pytest.raises(ValueError, match=r"Received: rank=2, size=2"):
        RingClusterResolver(2, 2)


@pytest.mark.timeout(120)
def test_single_process_strategy_has_a_resolver_and_is_chief():
    """One process, no launcher (as MultiWorkerMirroredStrategy in one plain process)."""
    import subprocess
    import sys

    from tests.helpers import job_env

    code = (
        "import tensorflow as tf, tfring\n"
        "s = tfring.RingStrategy()\n"
        "r = s.cluster_resolver\n"
        "assert isinstance(r, tf.distribute.cluster_resolver.ClusterResolver), r\n"
        "assert (r.task_type, r.task_id) == ('worker', 0), (r.task_type, r.task_id)\n"
        "assert r.cluster_spec().as_dict() == {'worker': ['rank0.tfring.invalid:0']}\n"
        "e = s.extended\n"
        "assert e.should_checkpoint and e.should_save_summary and e.experimental_should_init and e._is_chief\n"
        "print('resolver OK')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=job_env(), capture_output=True, text=True, timeout=100,
                         check=False)
    assert "resolver OK" in out.stdout, out.stdout + out.stderr
