"""Worker: every recoverable error of tfring.tensorflow raises its tf.errors class on every
rank (eagerly and from a tf.function), with a message naming the tensor, and the next op
works. Python-level misuse raises ValueError/TypeError before anything is submitted; XLA is
refused at trace time; ops after shutdown fail with FailedPreconditionError.
Prints "rank R: tf errors OK" at the end."""

import time
import warnings

import numpy as np
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
tf.get_logger().setLevel("ERROR")

import tfring.tensorflow as hvd

hvd.init()
r, n = hvd.rank(), hvd.size()


@tf.function(autograph=False)
def working(x):
    return hvd.allreduce(x, op=hvd.Sum)


def expect(exc_class, fn, *needles):
    try:
        fn()
    except exc_class as e:
        message = getattr(e, "message", str(e))
        for needle in needles:
            assert needle in message, f"rank {r}: {needle!r} not in {message!r}"
    else:
        raise AssertionError(f"rank {r}: expected {exc_class.__name__}")
    # the job goes on: collectives right after the error work, eagerly and in a graph
    assert hvd.allreduce(tf.ones([3]), op=hvd.Sum).numpy().tolist() == [n] * 3
    assert working(tf.ones([2])).numpy().tolist() == [n] * 2


def in_function(fn):
    return lambda: tf.function(fn, autograph=False)()


# ---- cross-rank mismatches -> FailedPreconditionError on every rank
shape = [3] if r != n - 1 else [4]
for mode in (lambda f: f, in_function):
    expect(tf.errors.FailedPreconditionError,
           mode(lambda: hvd.allreduce(tf.ones(shape), name="bad_shape")), "bad_shape", "shape", "[3]", "[4]")
    dtype = tf.float32 if r == 0 else tf.float64
    expect(tf.errors.FailedPreconditionError,
           mode(lambda dtype=dtype: hvd.allreduce(tf.ones([2], dtype), name="bad_dtype")), "bad_dtype", "dtype")
    op = hvd.Sum if r == 0 else hvd.Max
    expect(tf.errors.FailedPreconditionError,
           mode(lambda op=op: hvd.allreduce(tf.ones([2]), op=op, name="bad_op")), "bad_op", "reduce op")
    expect(tf.errors.FailedPreconditionError,
           mode(lambda: hvd.broadcast(tf.ones([2]), 0 if r == 0 else 1, name="bad_root")), "bad_root", "root")
    expect(tf.errors.FailedPreconditionError,
           mode(lambda: hvd.allgather(tf.ones([1, 2 + (r == 1)]), name="bad_tail")), "bad_tail")

# ---- bad arguments -> InvalidArgumentError on every rank
for mode in (lambda f: f, in_function):
    expect(tf.errors.InvalidArgumentError, mode(lambda: hvd.broadcast(tf.ones([2]), n)), "root_rank",
           "out of range")
    expect(tf.errors.InvalidArgumentError, mode(lambda: hvd.broadcast(tf.ones([2]), -1)), "out of range")
    expect(tf.errors.InvalidArgumentError,
           mode(lambda: hvd.alltoall(tf.ones([5]), splits=[5] + [1] * (n - 1))), "splits sum to")
    expect(tf.errors.InvalidArgumentError, mode(lambda: hvd.alltoall(tf.ones([4]), splits=[4])), "entries")
    expect(tf.errors.InvalidArgumentError, mode(lambda: hvd.alltoall(tf.ones([n + 1]))), "divide evenly")
expect(tf.errors.InvalidArgumentError, lambda: hvd.allgather(tf.constant(1.0)), "at least one dimension")


# duplicate in-flight name. After a barrier, one rank (the laggard) waits 0.5 s and submits a
# single "dup"; on every other rank the first "dup" cannot complete before then, so it is in
# flight when the second is submitted: the first completes, the second fails. (The laggard
# itself cannot be tested so: on the last rank to submit, the first "dup" may complete
# before the second is submitted, which is then a new collective nobody else joins; seen
# once at np=3 on 2 cores.) Two rounds with different laggards test every rank.
@tf.function(autograph=False)
def duplicate():
    a = hvd.allreduce(tf.ones([2]), name="dup")
    b = hvd.allreduce(tf.ones([2]), name="dup")
    return a, b


@tf.function(autograph=False)
def single():
    return hvd.allreduce(tf.ones([2]), name="dup")


for laggard in (n - 1, 0):
    hvd.barrier()
    if r == laggard:
        time.sleep(0.5)
        assert single().numpy().tolist() == [1.0, 1.0]  # the default op averages
        # what expect() runs after the error on the other ranks
        assert hvd.allreduce(tf.ones([3]), op=hvd.Sum).numpy().tolist() == [n] * 3
        assert working(tf.ones([2])).numpy().tolist() == [n] * 2
    else:
        expect(tf.errors.InvalidArgumentError, duplicate, "dup", "already in flight")

# ---- unsupported -> UnimplementedError on every rank
expect(tf.errors.UnimplementedError, lambda: hvd.allreduce(tf.constant([True]), op=hvd.Average), "bool")
expect(tf.errors.UnimplementedError, in_function(lambda: hvd.allreduce(tf.constant([True]), op=hvd.Average)),
       "bool")

# ---- Python-level misuse: raised before anything is submitted (no rank waits)
expect(ValueError, lambda: hvd.allreduce(tf.ones([2]), op=42), "op must be")
expect(ValueError, lambda: hvd.allreduce(tf.ones([2]), op=hvd.Sum, average=True), "supersedes")
expect(ValueError, lambda: hvd.allreduce(tf.ones([2]), name=""), "name")
expect(TypeError, lambda: hvd.broadcast(tf.ones([2]), tf.constant(0)), "root_rank")
expect(TypeError, lambda: hvd.DistributedGradientTape(object()), "GradientTape")
expect(ValueError, lambda: hvd.DistributedGradientTape(tf.GradientTape(), op=hvd.Sum, gradient_predivide_factor=2.0),
       "gradient_predivide_factor")
expect(ValueError, in_function(lambda: hvd.allgather(tf.constant(1.0))), "rank")  # shape function
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    assert hvd.allreduce(tf.ones([1]), average=True).numpy().tolist() == [1.0]
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)


# ---- XLA: ops without a lowering (join, barrier) refused at trace time with the fix
@tf.function(jit_compile=True, autograph=False)
def jitted_barrier():
    return hvd.barrier()


expect(tf.errors.UnimplementedError, jitted_barrier, "no XLA lowering", "jit_compile=False")

# ---- after shutdown: FailedPreconditionError, also from tfring.tensorflow's object helpers
hvd.barrier()
print(f"rank {r}: tf errors OK", flush=True)
hvd.shutdown()
for fn in (lambda: hvd.allreduce(tf.ones([1])), lambda: working(tf.ones([2])), lambda: hvd.broadcast_object(1)):
    try:
        fn()
    except tf.errors.FailedPreconditionError as e:
        assert "not initialized" in e.message or "shut down" in e.message, e.message
    else:
        raise AssertionError("use after shutdown must fail")
print(f"rank {r}: after shutdown OK", flush=True)
np.zeros(1)
