"""Worker: tfring.tensorflow's collectives inside tf.function(jit_compile=True) give exactly
what the same collectives give eagerly: allreduce (every dtype x reduce op, pre/postscale),
grouped allreduce of 100 tensors (fused as eagerly: stats), broadcast, allgather, alltoall,
reducescatter, a process set (np >= 3); errors named at compile and run time; a custom
training loop (DistributedGradientTape) and Keras fit with jit_compile=True (weights equal on
every rank and equal to one process training on the global batch; also with fp16
compression, backward_passes_per_step and mixed_float16). Prints
"rank R: tf xla OK" at the end."""

import warnings

import numpy as np
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
tf.get_logger().setLevel("ERROR")
warnings.simplefilter("ignore", DeprecationWarning)

import keras

import tfring
import tfring.keras as hvd_keras
import tfring.tensorflow as hvd
from tests.workers.rank_checks import assert_same_on_all_ranks

hvd.init()
r, n = hvd.rank(), hvd.size()

DTYPES = [tf.uint8, tf.int8, tf.int16, tf.uint16, tf.int32, tf.int64, tf.float16, tf.bfloat16, tf.float32, tf.float64,
          tf.bool]
OPS = {hvd.Sum: "Sum", hvd.Average: "Average", hvd.Min: "Min", hvd.Max: "Max", hvd.Product: "Product"}


def data(dtype, shape, rank, salt=0):
    """Rank-dependent values every rank can recompute."""
    base = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape) + salt
    if dtype == tf.bool:
        return (base + rank) % 2 == 0
    return ((base + rank) % 3 + 1).astype(dtype.as_numpy_dtype)  # 1..3: products stay small


def same(label, got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (label, got.dtype, want.dtype, got.shape, want.shape)
    assert np.array_equal(got.astype(np.float64), want.astype(np.float64)), (label, got, want)


def jit(fn):
    return tf.function(fn, jit_compile=True, autograph=False)


# 1. allreduce: every dtype x reduce op, and pre/postscale, in one compiled function ---------
cases = [(dt, op) for dt in DTYPES for op in OPS if not (dt == tf.bool and op == hvd.Average)]
scaled = [tf.float32, tf.float64, tf.float16, tf.int32]
inputs = [tf.constant(data(dt, (2, 3), r, i)) for i, (dt, _) in enumerate(cases)]
scaled_inputs = [tf.constant(data(dt, (4,), r, 7)) for dt in scaled]


def reductions(xs, ys):
    out = [hvd.allreduce(x, op=op) for x, (_, op) in zip(xs, cases)]
    out += [hvd.allreduce(y, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0) for y in ys]
    out.append(hvd.allreduce(ys[0], op=hvd.Average, prescale_factor=2.0))
    return out


compiled = jit(reductions)(inputs, scaled_inputs)
eager = reductions(inputs, scaled_inputs)
for i, (got, want) in enumerate(zip(compiled, eager)):
    same(f"allreduce case {i}", got.numpy(), want.numpy())
# ... and NumPy agrees with both (float32 Sum and Average)
xs = np.stack([data(tf.float32, (2, 3), j, cases.index((tf.float32, hvd.Sum))) for j in range(n)])
np.testing.assert_allclose(compiled[cases.index((tf.float32, hvd.Sum))].numpy(), xs.sum(0))
xs = np.stack([data(tf.float32, (2, 3), j, cases.index((tf.float32, hvd.Average))) for j in range(n)])
np.testing.assert_allclose(compiled[cases.index((tf.float32, hvd.Average))].numpy(), xs.mean(0), rtol=1e-6)
print(f"rank {r}: {len(compiled)} compiled allreduces equal eager", flush=True)

# 2. grouped allreduce of 100 tensors: one group, fused as eagerly --------------------------
group = [tf.constant(data(tf.float32, (3 + i % 5,), r, i)) for i in range(100)]


def grouped(ts):
    return hvd.grouped_allreduce(ts, op=hvd.Sum)


def fused_during(fn):
    before = tfring.stats()
    out = fn(group)
    after = tfring.stats()
    return out, {k: after[k] - before[k] for k in ("collectives", "tensors", "fused_tensors")}


jit_grouped = jit(grouped)
jit_grouped(group)  # compiled (and run) once
got, jit_stats = fused_during(jit_grouped)
want, eager_stats = fused_during(grouped)
for i, (a, b) in enumerate(zip(got, want)):
    same(f"grouped member {i}", a.numpy(), b.numpy())
assert jit_stats["tensors"] == 100 and jit_stats["fused_tensors"] == eager_stats["fused_tensors"] >= 99, (
    jit_stats, eager_stats)
assert jit_stats["collectives"] == eager_stats["collectives"] <= 2, (jit_stats, eager_stats)
print(f"rank {r}: grouped allreduce of 100 under XLA: {jit_stats} (eager {eager_stats})", flush=True)

# 3. broadcast, allgather, alltoall, reducescatter ------------------------------------------
root = n - 1
b_in = [tf.constant(data(dt, (3, 2), r, 1)) for dt in DTYPES]
g_in = tf.constant(data(tf.float32, (2, 3), r, 2))
a_in = tf.constant(data(tf.int32, (2 * n, 2), r, 3))
rs_in = tf.constant(data(tf.float64, (2 * n + 1, 2), r, 4))


def others(bs, g, a, rs):
    return ([hvd.broadcast(b, root_rank=root) for b in bs],
            hvd.allgather(g), hvd.alltoall(a), hvd.alltoall(a, splits=[2] * n),
            hvd.reducescatter(rs, op=hvd.Sum), hvd.reducescatter(rs, op=hvd.Average))


c_out, e_out = jit(others)(b_in, g_in, a_in, rs_in), others(b_in, g_in, a_in, rs_in)
for i, (got, want) in enumerate(zip(c_out[0], e_out[0])):
    same(f"broadcast {DTYPES[i].name}", got.numpy(), want.numpy())
    same(f"broadcast {DTYPES[i].name} vs root", got.numpy(), data(DTYPES[i], (3, 2), root, 1))
same("allgather", c_out[1].numpy(), e_out[1].numpy())
same("alltoall", c_out[2].numpy(), e_out[2].numpy())
same("alltoall splits", c_out[3][0].numpy(), e_out[3][0].numpy())
same("alltoall received splits", c_out[3][1].numpy(), e_out[3][1].numpy())
same("reducescatter Sum", c_out[4].numpy(), e_out[4].numpy())
same("reducescatter Average", c_out[5].numpy(), e_out[5].numpy())
print(f"rank {r}: broadcast, allgather, alltoall, reducescatter under XLA equal eager", flush=True)

# 4. a process set (np >= 3): only its members run the compiled collective ------------------
if n >= 3:
    ps = hvd.add_process_set([0, 2])
    if r in (0, 2):
        x = tf.constant(data(tf.float32, (4,), r, 5))
        got = jit(lambda t: hvd.allreduce(t, op=hvd.Average, process_set=ps))(x)
        same("process set allreduce", got.numpy(), hvd.allreduce(x, op=hvd.Average, process_set=ps).numpy())
        g = jit(lambda t: hvd.allgather(t, process_set=ps))(x)
        assert g.shape == (8,), g.shape
    hvd.barrier()
    hvd.remove_process_set(ps)
    print(f"rank {r}: process set under XLA equal eager", flush=True)


# 5. errors ---------------------------------------------------------------------------------
def expect(cls, fn, *fragments):
    try:
        fn()
    except cls as e:
        for f in fragments:
            assert f in str(e), (f, str(e))
        return
    raise AssertionError(f"expected {cls.__name__} with {fragments}")


# uneven alltoall splits have no static shape: a compile-time error naming tensor and fix
expect(tf.errors.InvalidArgumentError,
       lambda: jit(lambda t: hvd.alltoall(t, splits=[1] * (n - 1) + [n + 1], name="uneven.a2a"))(
           tf.zeros([2 * n, 2])), "alltoall of tensor 'uneven.a2a'", "only an even split", "Fix:")
# allgather with rank-dependent first dimensions: a run-time error naming tensor and fix,
# on every rank whose compiled shape is wrong, and the next collective works
x = tf.ones([r + 1, 2])
try:
    jit(lambda t: hvd.allgather(t, name="ragged.gather"))(x)
    ragged_error = None
except tf.errors.InvalidArgumentError as e:
    ragged_error = str(e)
if n * (r + 1) != sum(j + 1 for j in range(n)):
    assert ragged_error and "allgather of tensor 'ragged.gather'" in ragged_error and "Fix:" in ragged_error, (
        ragged_error)
same("after an error", hvd.allreduce(tf.ones([2]), op=hvd.Sum).numpy(), np.full(2, n, np.float32))
print(f"rank {r}: XLA errors named", flush=True)

# 6. a custom training loop: DistributedGradientTape inside jit_compile=True ----------------
w = tf.Variable(tf.zeros([3, 1]))
X = np.random.default_rng(0).standard_normal((8 * n, 3)).astype(np.float32)
Y = X @ np.array([[1.0], [-2.0], [0.5]], np.float32)
mine = slice(8 * r, 8 * (r + 1))


@tf.function(jit_compile=True)
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((x @ w - y) ** 2)
    tape = hvd.DistributedGradientTape(tape)
    (g,) = tape.gradient(loss, [w])
    w.assign_sub(0.1 * g)
    return loss


for _ in range(3):
    train_step(X[mine], Y[mine])
w_ref = np.zeros([3, 1], np.float32)
for _ in range(3):  # one process on the global batch (equal halves: the mean of the means)
    grad = 2 * X.T @ (X @ w_ref - Y) / len(X)
    w_ref = w_ref - 0.1 * grad
np.testing.assert_allclose(w.numpy(), w_ref, rtol=1e-5, atol=1e-6)
assert_same_on_all_ranks(w.numpy(), "custom loop weights")
print(f"rank {r}: custom loop under XLA matches one process on the global batch", flush=True)


# 7. Keras fit with jit_compile=True: stays on, same weights everywhere, = np=1 ----------------
def model_and_weights():
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(1)])
    return model, [v.numpy() for v in model.weights]


with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model, initial = model_and_weights()
    model.compile(optimizer=hvd_keras.DistributedOptimizer(keras.optimizers.SGD(0.05)), loss="mse",
                  jit_compile=True)
    model.fit(X[mine], Y[mine], batch_size=8, epochs=4, shuffle=False, verbose=0)
assert model.jit_compile is True
assert not [w for w in caught if "jit_compile" in str(w.message)], [str(w.message) for w in caught]
distributed = [v.numpy() for v in model.weights]
assert_same_on_all_ranks(np.concatenate([v.ravel() for v in distributed]), "Keras fit weights")

reference, _ = model_and_weights()  # one process, the global batch, no tfring
for v, init in zip(reference.weights, initial):
    v.assign(init)
reference.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse", jit_compile=True)
reference.fit(X, Y, batch_size=8 * n, epochs=4, shuffle=False, verbose=0)
for a, b in zip(distributed, reference.weights):
    np.testing.assert_allclose(a, b.numpy(), rtol=1e-5, atol=1e-6)
print(f"rank {r}: Keras fit jit_compile=True matches np=1 on the global batch", flush=True)


# 8. fp16 compression, gradient accumulation, mixed precision (tfring's LossScaleOptimizer):
#    compiled, jit_compile kept, the same weights on every rank -------------------------------
def compiled_fit(label, optimizer, policy="float32"):
    keras.mixed_precision.set_global_policy(policy)
    try:
        model, _ = model_and_weights()
        model.compile(optimizer=optimizer, loss="mse", jit_compile=True)
        model.fit(X[mine], Y[mine], batch_size=4, epochs=1, shuffle=False, verbose=0)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert model.jit_compile is True, label
    assert_same_on_all_ranks(np.concatenate([v.numpy().ravel().astype(np.float64) for v in model.weights]), label)
    return model


compiled_fit("fp16 compression", hvd_keras.DistributedOptimizer(keras.optimizers.SGD(0.05),
                                                                compression=hvd_keras.Compression.fp16))
compiled_fit("backward_passes_per_step=2",
             hvd_keras.DistributedOptimizer(keras.optimizers.SGD(0.05), backward_passes_per_step=2))
lso = compiled_fit("mixed_float16", hvd_keras.DistributedOptimizer(keras.optimizers.SGD(0.05)), "mixed_float16")
assert type(lso.optimizer) is hvd_keras.LossScaleOptimizer, type(lso.optimizer)
print(f"rank {r}: compression, accumulation, mixed precision under XLA", flush=True)

hvd.barrier()
print(f"rank {r}: tf xla OK", flush=True)
hvd.shutdown()
