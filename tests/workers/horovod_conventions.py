"""Worker for tests/test_horovod_conventions.py: the rules where tfring.tensorflow must give
Horovod 0.28's numbers (docs/tensorflow.md "Gradient conventions"), in eager mode, in a
tf.function and in a TF1 graph run by a Session, plus the argument rules that used to
differ silently. Every rank prints "rank R: horovod conventions OK" at the end."""

import numpy as np
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

import tfring.tensorflow as hvd

hvd.init()
r, n = hvd.rank(), hvd.size()
W = np.arange(1.0, n + 1.0)  # rank j weighs its loss by W[j]
SESSION_TIMEOUT_MS = 20000   # a graph that deadlocks fails with DeadlineExceeded, not a hang


def close(label, got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-6, atol=1e-6):
        raise AssertionError(f"rank {r}: {label}: got {got.tolist()}, want {want.tolist()}")


# (label, fn of x, x on this rank, the Horovod gradient of sum(fn(x) * W[r]) on this rank)
root = n - 1
rows = r + 1  # allgather with a different first dimension on every rank
dim0 = 2 * n + 1
owner = np.concatenate([[j] * (dim0 // n + (j < dim0 % n)) for j in range(n)])
CASES = [
    ("allgather: Average allreduce, then this rank's rows",
     lambda x: hvd.allgather(x), np.ones((rows, 2)), np.full((rows, 2), W.mean())),
    ("broadcast: Average on the root, zero elsewhere",
     lambda x: hvd.broadcast(x, root), np.ones(3), np.full(3, W.mean() if r == root else 0.0)),
    ("reducescatter Sum: allgather of the gradient times size",
     lambda x: hvd.reducescatter(x, op=hvd.Sum), np.ones((dim0, 2)), np.repeat(W[owner][:, None] * n, 2, 1)),
    ("reducescatter Average: allgather of the gradient",
     lambda x: hvd.reducescatter(x, op=hvd.Average), np.ones((dim0, 2)), np.repeat(W[owner][:, None], 2, 1)),
    ("allreduce Average: the same allreduce",
     lambda x: hvd.allreduce(x, op=hvd.Average), np.ones(3), np.full(3, W.mean())),
]


def eager_and_function():
    for in_function in (False, True):
        for label, fn, x0, want in CASES:
            x = tf.Variable(x0)

            def grad(fn=fn, x=x):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_sum(fn(x) * W[r])
                return tape.gradient(loss, x)

            got = tf.function(grad, autograph=False)() if in_function else grad()
            close(("tf.function " if in_function else "eager ") + label, got, want)


def graph_mode():
    """tf.gradients + Session.run: the graph mode of a TF1 MonitoredTrainingSession script.
    Before the fix, a non-root rank's broadcast gradient did not depend on its allreduce,
    TF pruned it, and the root waited forever."""
    options = tf.compat.v1.RunOptions(timeout_in_ms=SESSION_TIMEOUT_MS)
    for label, fn, x0, want in CASES:
        with tf.Graph().as_default():
            x = tf.compat.v1.get_variable("x", initializer=tf.constant(x0))
            loss = tf.reduce_sum(fn(x) * W[r])
            (grad,) = tf.compat.v1.gradients(loss, [x])
            with tf.compat.v1.Session() as sess:
                sess.run(tf.compat.v1.global_variables_initializer(), options=options)
                close("graph " + label, sess.run(grad, options=options), want)


def argument_rules():
    x = tf.constant([float(r + 1), 2.0])
    # alltoall without splits: the tensor alone (with splits: the pair)
    out = hvd.alltoall(tf.reshape(tf.range(2 * n, dtype=tf.float32) + 10 * r, [2 * n, 1]))
    assert isinstance(out, tf.Tensor), type(out)
    close("alltoall without splits", out[:, 0], np.concatenate([[10.0 * j + 2 * r, 10.0 * j + 2 * r + 1]
                                                             for j in range(n)]))
    _received, splits = hvd.alltoall(tf.ones([n, 1]), splits=[1] * n)
    close("alltoall with splits: received splits", splits, np.ones(n))
    # integer IndexedSlices averaged: floats, never truncated
    for dtype, float_type in ((tf.int32, tf.float64), (tf.int64, tf.float64), (tf.int8, tf.float32)):
        slices = tf.IndexedSlices(tf.constant([[r + 2]], dtype), tf.constant([0]), tf.constant([1, 1]))
        red = hvd.allreduce(slices, op=hvd.Average)
        assert red.values.dtype == float_type, (dtype, red.values.dtype)
        close(f"IndexedSlices {dtype.name} Average", tf.math.unsorted_segment_sum(red.values, red.indices, 1),
              [[sum(j + 2 for j in range(n)) / n]])
    # a reduce op as the second positional argument (the deprecated `average`) is refused
    for bad in (hvd.Max, hvd.Min, hvd.Product, 2.0, "Sum"):
        try:
            hvd.allreduce(x, bad)
        except TypeError as e:
            assert "op=hvd.Max" in str(e) and "average" in str(e), e
        else:
            raise AssertionError(f"hvd.allreduce(x, {bad!r}) must be refused")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        close("average=True", hvd.allreduce(x, True), [np.mean(W), 2.0])
        close("average=False", hvd.allreduce(x, False), [W.sum(), 2.0 * n])
        close("average=np.bool_", hvd.allreduce(x, np.bool_(True)), [np.mean(W), 2.0])


def more_horovod_api():
    """The rest of Horovod's API that tfring provides (docs/tensorflow.md)."""
    import os
    # tfringrun exports horovodrun's identity variables too
    for key in ("RANK", "SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE"):
        assert os.environ["HOROVOD_" + key] == os.environ["TFRING_" + key], key
    # truthful capability answers: nothing of MPI/Gloo/oneCCL/ROCm; no GPU here
    assert (hvd.mpi_built(), hvd.gloo_built(), hvd.ccl_built(), hvd.rocm_built(), hvd.nccl_built(),
            hvd.cuda_built()) == (False,) * 6
    try:
        hvd.mpi_threads_supported()
    except ValueError as e:
        assert "never use MPI" in str(e)
    else:
        raise AssertionError("mpi_threads_supported() must raise")
    # identity ops read at run time: eager, tf.function, TF1 session
    ops = lambda: [hvd.rank_op(), hvd.size_op(), hvd.local_rank_op(), hvd.local_size_op(),
                   hvd.cross_rank_op(), hvd.cross_size_op()]
    want = [r, n, hvd.local_rank(), hvd.local_size(), hvd.cross_rank(), hvd.cross_size()]
    assert [int(t) for t in ops()] == want
    assert [int(t) for t in tf.function(ops)()] == want
    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        assert [int(v) for v in sess.run(ops())] == want
    # grouped allgather / reducescatter: each member as its single op, mixed dtypes
    for in_function in (False, True):
        def grouped():
            gathered = hvd.grouped_allgather([tf.fill([r + 1, 2], float(r)), tf.constant([r], tf.int64)])
            scattered = hvd.grouped_reducescatter([tf.ones([n, 2]) * (r + 1), tf.ones([2 * n]) * (r + 1)],
                                                  op=hvd.Sum)
            return gathered + scattered
        g0, g1, s0, s1 = tf.function(grouped)() if in_function else grouped()
        close("grouped_allgather float", g0, np.concatenate([np.full((j + 1, 2), float(j)) for j in range(n)]))
        close("grouped_allgather int64", g1, np.arange(n))
        close("grouped_reducescatter 0", s0, np.full((1, 2), W.sum()))
        close("grouped_reducescatter 1", s1, np.full(2, W.sum()))
    # broadcast_: in place, returns the new values (eager and tf.function)
    v = tf.Variable([float(r), 1.0])
    close("broadcast_ eager", hvd.broadcast_([v], root_rank=1)[0], [1.0, 1.0])
    close("broadcast_ variable", v, [1.0, 1.0])
    v.assign([float(r), 2.0])
    close("broadcast_ tf.function", tf.function(lambda: hvd.broadcast_([v], 0))()[0], [0.0, 2.0])
    close("broadcast_ tf.function variable", v, [0.0, 2.0])
    # broadcast_object_fn
    bcast = hvd.broadcast_object_fn(root_rank=0)
    assert bcast({"from": r}) == {"from": 0}
    assert bcast([r] * 3) == [0, 0, 0]


eager_and_function()
graph_mode()
argument_rules()
more_horovod_api()
print(f"rank {r}: horovod conventions OK", flush=True)
