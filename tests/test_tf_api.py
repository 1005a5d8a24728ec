"""tfring.tensorflow in this process (a job of one rank, no launcher): the public API, the
naming rule, XLA refusal, compression, argument checks, gradients and TF1 graph mode.
The multi-rank behaviour is in test_tf_collectives.py / test_tf_errors.py."""

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from tensorflow.python.framework import op_def_registry

import tfring
import tfring.tensorflow as hvd
from tfring._api import exports
from tfring._tensorflow import _loader, naming

PUBLIC_API = exports.public_names("tfring.tensorflow")  # the one list: tfring/_api/exports.py


@pytest.fixture(scope="module", autouse=True)
def job_of_one():
    hvd.init()
    yield
    hvd.shutdown()


def tfring_ops(graph):
    return [o for o in graph.get_operations() if o.type.startswith("Tfring")]


def keys(op):
    attr = op.node_def.attr
    if "tensor_names" in attr:
        return [s.decode() for s in attr["tensor_names"].list.s]
    return [attr["tensor_name"].s.decode()]


def test_public_api_is_pinned():
    assert sorted(hvd.__all__) == sorted(PUBLIC_API)
    for name in PUBLIC_API:
        assert hasattr(hvd, name), name
    assert (hvd.Sum, hvd.Average, hvd.Min, hvd.Max, hvd.Product) == (
        tfring.Sum, tfring.Average, tfring.Min, tfring.Max, tfring.Product)
    assert (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.cross_size()) == (0, 1, 0, 1)
    assert _loader.op_library() is _loader.op_library()  # loaded once
    assert _loader.ops_are_unordered()


def test_collectives_on_one_rank_eager_and_in_a_function():
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])

    def run():
        out = hvd.alltoall(x)  # without splits: the tensor alone, as Horovod
        _, splits = hvd.alltoall(x, splits=[2])
        return [hvd.allreduce(x), hvd.allreduce(x, op=hvd.Max), hvd.allgather(x), hvd.broadcast(x, 0), out,
                tf.cast(splits, tf.float32), hvd.reducescatter(x, op=hvd.Sum), *hvd.grouped_allreduce([x, 2 * x])]

    for results in (run(), tf.function(run, autograph=False)()):
        for got in results[:5] + results[6:7]:
            np.testing.assert_array_equal(got.numpy(), x.numpy())
        assert results[5].numpy().tolist() == [2.0]
        np.testing.assert_array_equal(results[8].numpy(), 2 * x.numpy())
    hvd.barrier()
    assert int(hvd.join()) == 0  # one rank: the last (and only) rank to join
    assert int(tf.function(lambda: hvd.join())()) == 0
    assert hvd.broadcast_object({"a": [1]}) == {"a": [1]}
    assert hvd.allgather_object("x") == ["x"]


def test_graph_names_are_scoped_unique_and_stable_across_retraces():
    @tf.function(autograph=False)
    def step(x):
        a = hvd.allreduce(x)
        b = hvd.allreduce(x)
        with tf.name_scope("grads"):
            c = hvd.grouped_allreduce([x, x])
        d = hvd.allreduce(x, name="my.explicit name")
        e = tf.cond(tf.reduce_sum(x) > 0, lambda: hvd.allgather(x), lambda: x)
        return a, b, c, d, e

    traces = [step.get_concrete_function(tf.TensorSpec([k], tf.float32)) for k in (2, 3, 2)]
    names = [[k for op in tfring_ops(t.graph) for k in keys(op)] for t in traces]
    assert names[0] == ["step/TfringAllreduce", "step/TfringAllreduce_1", "step/grads/TfringGroupedAllreduce.0",
                        "step/grads/TfringGroupedAllreduce.1", "my.explicit name"], names[0]
    assert names[0] == names[1] == names[2]  # a new trace (new shape) gives the same names
    cond_graph = next(op for op in traces[0].graph.get_operations() if op.type in ("If", "StatelessIf"))
    branch = traces[0].graph._get_function(cond_graph.get_attr("then_branch").name)
    assert [k for op in branch.graph.get_operations() if op.type == "TfringAllgather" for k in keys(op)] == [
        "step/cond/TfringAllgather"]
    assert [op.name for op in tfring_ops(traces[0].graph)][-1] == "my.explicit_name"  # valid op name


def test_tf1_graph_names_have_no_prefix_and_eager_names_count():
    with tf.Graph().as_default() as g:
        hvd.allreduce(tf.ones([1]))
        hvd.allreduce(tf.ones([1]))
        assert [k for op in tfring_ops(g) for k in keys(op)] == ["TfringAllreduce", "TfringAllreduce_1"]
    first = naming.eager_key("allreduce")
    kind, mode, n = first.rsplit(".", 2)
    assert (kind, mode) == ("allreduce", "eager")
    assert naming.eager_key("allreduce") == f"allreduce.eager.{int(n) + 1}"
    assert naming.eager_key("allreduce", "given") == "given"


def test_xla_compiles_collectives_and_refuses_join_at_trace_time():
    @tf.function(jit_compile=True, autograph=False)
    def jitted(x):
        return hvd.allreduce(x)

    assert jitted(tf.ones([2])).numpy().tolist() == [1.0, 1.0]

    @tf.function(jit_compile=True, autograph=False)
    def joins():
        return hvd.join()

    with pytest.raises(tf.errors.UnimplementedError, match="tfring.tensorflow.join.*no XLA lowering"):
        joins()


def test_compression():
    x = tf.constant([1.5, 2.25], tf.float64)
    packed, ctx = hvd.Compression.fp16.compress(x)
    assert packed.dtype == tf.float16 and hvd.Compression.fp16.decompress(packed, ctx).dtype == tf.float64
    ints, ctx = hvd.Compression.fp16.compress(tf.constant([1, 2]))
    assert ints.dtype == tf.int32 and ctx is None
    assert hvd.Compression.none.compress(x) == (x, None)
    out = hvd.allreduce(x, compression=hvd.Compression.fp16)
    assert out.dtype == tf.float64 and out.numpy().tolist() == [1.5, 2.25]


def test_argument_checks():
    with pytest.raises(ValueError, match="supersedes"):
        hvd.allreduce(tf.ones([1]), average=True, op=hvd.Sum)
    with pytest.raises(ValueError, match="op must be"):
        hvd.allreduce(tf.ones([1]), op=7)
    with pytest.raises(ValueError, match="name"):
        hvd.allgather(tf.ones([1]), name="")
    with pytest.raises(TypeError, match="root_rank"):
        hvd.broadcast(tf.ones([1]), 0.0)
    with pytest.raises(ValueError, match="None"):
        hvd.grouped_allreduce([tf.ones([1]), None])
    assert hvd.grouped_allreduce([]) == []
    with pytest.raises(RuntimeError, match="graph mode"):
        hvd.broadcast_global_variables(0)
    with pytest.raises(TypeError, match="optimizer"):
        hvd.DistributedOptimizer(object())
    with pytest.raises(tf.errors.InvalidArgumentError, match="out of range"):
        hvd.broadcast(tf.ones([1]), 1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="out of range"):
        hvd.broadcast_object(1, root_rank=3)


def test_gradients_on_one_rank():
    x = tf.Variable([1.0, -2.0, 3.0])
    with tf.GradientTape(persistent=True) as tape:
        ys = [hvd.allreduce(x, op=hvd.Sum, prescale_factor=2.0, postscale_factor=3.0), hvd.allgather(x),
              hvd.broadcast(x, 0), hvd.alltoall(x), hvd.reducescatter(x, op=hvd.Average),
              hvd.allreduce(x, op=hvd.Max), hvd.allreduce(x, op=hvd.Product)]
        ys = [tf.reduce_sum(y) for y in ys]
    want = [6.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    for y, w in zip(ys, want):
        assert tape.gradient(y, x).numpy().tolist() == [w] * 3


def test_distributed_gradient_tape_keeps_the_tape_type_and_structure():
    x = tf.Variable([1.0, 2.0])
    emb = tf.Variable(tf.ones([4, 2]))
    with hvd.DistributedGradientTape(tf.GradientTape()) as tape:  # wrapped before recording
        loss = tf.reduce_sum(x * x) + tf.reduce_sum(tf.gather(emb, [1, 3]))
    assert isinstance(tape, tf.GradientTape)
    grads = tape.gradient(loss, {"x": x, "emb": emb})
    assert grads["x"].numpy().tolist() == [2.0, 4.0]
    assert isinstance(grads["emb"], tf.IndexedSlices)


def test_tf1_optimizer_and_hook_in_a_monitored_session():
    with tf.Graph().as_default():
        w = tf.compat.v1.get_variable("w", initializer=tf.constant([1.0, 2.0]))
        loss = tf.reduce_sum(w * w)
        opt = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.25))
        assert opt.get_name() == "DistributedGradientDescentOptimizer"
        grads_and_vars = opt.compute_gradients(loss)
        # One rank: nothing to reduce, so no collective in the graph (Horovod's rule; the
        # np=2 graph is examples/tf1_monitored_session.py in test_tf_examples.py).
        assert tfring_ops(tf.compat.v1.get_default_graph()) == []
        train = opt.apply_gradients(grads_and_vars)
        with tf.compat.v1.train.MonitoredSession(hooks=[hvd.BroadcastGlobalVariablesHook(0)]) as sess:
            sess.run(train)
            assert sess.run(w).tolist() == [0.5, 1.0]


def test_monitored_session_recovery_after_a_lost_rank_ends_instead_of_looping():
    # MonitoredSession re-creates its session on UnavailableError (its "preemption"); the
    # hook turns the second creation into FailedPreconditionError so the loop ends.
    with tf.Graph().as_default():
        tf.compat.v1.get_variable("w", initializer=tf.constant([1.0]))
        hook = hvd.BroadcastGlobalVariablesHook(0)
        hook.begin()
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            hook.after_create_session(sess, None)
            with pytest.raises(tf.errors.FailedPreconditionError, match="Restart the whole job"):
                hook.after_create_session(sess, None)


def test_ops_are_distributed_communication_ops_so_errors_keep_their_class():
    # otherwise TF rewrites a lost peer's UnavailableError into InternalError inside functions
    for name in ("TfringAllreduce", "TfringGroupedAllreduce", "TfringAllgather", "TfringBroadcast",
                 "TfringAlltoall", "TfringReducescatter", "TfringBarrier"):
        assert op_def_registry.get(name).is_distributed_communication, name


def test_gradient_buckets_walk_from_the_last_layer_and_close_at_the_limit():
    from tfring._tensorflow.grad_reduction import gradient_buckets

    ts = [tf.zeros([256]), tf.zeros([1024]), tf.zeros([10]), tf.zeros([512])]  # 1 KiB, 4 KiB, 40 B, 2 KiB
    assert gradient_buckets(ts, 4096) == [[3, 2], [1], [0]]
    assert gradient_buckets(ts, 0) == [[3, 2, 1, 0]]
    assert gradient_buckets(ts, 1 << 30) == [[3, 2, 1, 0]]
    assert gradient_buckets([], 4096) == []


def test_bucketed_allreduce_keeps_the_order_and_makes_one_op_per_bucket():
    ts = [tf.fill([256], 1.0), tf.fill([1024], 2.0), tf.fill([10], 3.0), tf.fill([512], 4.0)]

    @tf.function
    def step(*xs):
        return hvd.bucketed_allreduce(list(xs), name="buckets", bucket_bytes=4096, op=hvd.Sum)

    out = step(*ts)
    for got, want in zip(out, ts):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    graph = step.get_concrete_function(*ts).graph
    assert [op.type for op in tfring_ops(graph)] == ["TfringGroupedAllreduce"] * 3


def test_collectives_in_a_while_loop():
    @tf.function(autograph=False)
    def loop(x):
        return tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, hvd.allreduce(v, op=hvd.Sum) + 1.0),
                             (tf.constant(0), x))[1]

    assert loop(tf.zeros([2])).numpy().tolist() == [3.0, 3.0]


def test_keras_optimizers_go_to_tfring_keras():
    keras = pytest.importorskip("keras")
    pytest.importorskip("tfring.keras")
    from tfring.keras import is_distributed

    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1), compression=hvd.Compression.fp16)
    assert isinstance(opt, keras.optimizers.SGD) and is_distributed(opt)
    assert hvd.barrier() is None


def test_collectives_with_unused_results_still_run_in_a_function():
    @tf.function(autograph=False)
    def step(x):
        hvd.allreduce(x)  # result unused: must still run (every rank expects it)
        hvd.barrier()
        return x + 1

    before = tfring.stats()["tensors"]
    step(tf.ones([2]))
    step(tf.ones([2]))
    assert tfring.stats()["tensors"] - before == 4


def test_adasum_on_one_rank_is_the_identity_and_accepted_where_horovod_takes_it():
    """op=hvd.Adasum (issue 14) is the core's reduce op: with one rank the Adasum of one
    tensor is the tensor (times the scale factors; no 1/size); the tape and the Keras
    optimizer take it, a TF1 optimizer becomes the delta optimizer; sparse values are refused.
    The multi-rank numbers are in test_adasum.py."""
    import keras

    import tfring.keras as hvd_keras
    from tfring import _core

    assert hvd.Adasum == hvd_keras.Adasum == tfring.Adasum == _core.reduce_ops()["Adasum"]
    x = tf.constant([1.0, -2.0, 3.0])
    np.testing.assert_array_equal(hvd.allreduce(x, op=hvd.Adasum), x)
    np.testing.assert_array_equal(hvd.allreduce(x, op=hvd.Adasum, prescale_factor=2.0, postscale_factor=3.0), 6 * x)
    np.testing.assert_array_equal(tf.function(lambda t: hvd.allreduce(t, op=hvd.Adasum))(x), x)
    with pytest.raises(NotImplementedError, match="sparse_as_dense=True"):
        hvd.allreduce(tf.IndexedSlices(tf.ones((1, 3)), tf.constant([0])), op=hvd.Adasum)
    delta = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.1), op=hvd.Adasum)
    assert type(delta).__name__ == "DistributedAdasumOptimizer"  # Horovod's delta optimizer
    hvd.DistributedGradientTape(tf.GradientTape(), op=hvd.Adasum)
    hvd_keras.DistributedOptimizer(keras.optimizers.SGD(), op=hvd_keras.Adasum)
