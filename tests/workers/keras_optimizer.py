"""2+ ranks: DistributedOptimizer's reduction options, gradient accumulation, mixed
precision with an overflow on one rank, sparse gradients, and no second reduction under a
strategy. Prints "rank R: keras optimizer OK"."""

import warnings

import numpy as np
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

import keras

import tfring.keras as hvd
from tests.workers.rank_checks import assert_same_on_all_ranks, flat
from tfring.distribute import RingStrategy

hvd.init()
rank, size = hvd.rank(), hvd.size()


def weights(model):
    return flat(model.trainable_variables)


# 1. One apply() with known per-rank gradients: op, predivide, compression -----------------
local_grad = np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * rank
all_grads = np.stack([np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * r for r in range(size)])
cases = [
    ({}, all_grads.mean(0)),
    ({"op": hvd.Sum}, all_grads.sum(0)),
    ({"gradient_predivide_factor": 2.0}, all_grads.mean(0)),
    ({"compression": hvd.Compression.fp16}, all_grads.mean(0)),
]
for kwargs, expected in cases:
    var = keras.Variable(np.zeros((2, 3), np.float32))
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(1.0), **kwargs)
    opt.apply([tf.constant(local_grad)], [var])
    assert np.allclose(-var.numpy(), expected, rtol=1e-3), (kwargs, var.numpy(), expected)

# Under a tf.distribute strategy the strategy reduces: the optimizer must not reduce again.
strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
with strategy.scope():
    var = keras.Variable(np.zeros((2, 3), np.float32))
    opt = hvd.DistributedOptimizer(keras.optimizers.SGD(1.0))
    opt.build([var])
strategy.run(tf.function(lambda: opt.apply([tf.constant(local_grad)], [var])))
assert np.allclose(-var.numpy(), local_grad), "reduced under a strategy"

# Under tfring.RingStrategy with op=Sum: a second reduction would double the update.

xs = np.random.RandomState(0).rand(16, 3).astype("float32")
ys = xs.sum(axis=1, keepdims=True)
trained = []
for use_ring in (True, False):
    scope = RingStrategy().scope() if use_ring else tf.distribute.get_strategy().scope()
    with scope:
        keras.utils.set_random_seed(1)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
        opt = keras.optimizers.SGD(0.1)
        model.compile(optimizer=hvd.DistributedOptimizer(opt, op=hvd.Sum) if use_ring else opt, loss="mse")
    # Ring: the global batch of 8 is split over the ranks; reference: one process, batch 8.
    model.fit(xs, ys, batch_size=8, epochs=2, shuffle=False, verbose=0)
    trained.append(weights(model))
assert np.allclose(trained[0], trained[1], rtol=1e-5, atol=1e-6), trained

# 2. backward_passes_per_step=2 equals one step on the larger batch -------------------------
rng = np.random.RandomState(7)
X = rng.rand(8 * 2 * size, 5).astype("float32")  # 2 micro-batches of 8 on every rank
Y = rng.rand(8 * 2 * size, 2).astype("float32")
mine = slice(16 * rank, 16 * rank + 16)


def linear(seed):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((5,)), keras.layers.Dense(2)])


reference = linear(1)
w0 = [v.numpy() for v in reference.trainable_variables]
with tf.GradientTape() as tape:
    loss = keras.losses.MeanSquaredError()(Y, reference(X))
grads = tape.gradient(loss, reference.trainable_variables)
expected = np.concatenate([np.ravel(w - 0.1 * g.numpy()) for w, g in zip(w0, grads)])

model = linear(1)
model.compile(
    optimizer=hvd.DistributedOptimizer(
        keras.optimizers.SGD(0.1), backward_passes_per_step=2, average_aggregated_gradients=True
    ),
    loss="mse",
)
model.train_on_batch(X[mine][:8], Y[mine][:8])
assert np.array_equal(weights(model), np.concatenate([np.ravel(w) for w in w0])), "applied after one pass"
assert int(model.optimizer.iterations) == 1
model.train_on_batch(X[mine][8:], Y[mine][8:])
assert int(model.optimizer.iterations) == 2
assert np.allclose(weights(model), expected, rtol=1e-5, atol=1e-6), (weights(model), expected)
assert len(model.optimizer.variables) == len(keras.optimizers.SGD(0.1).variables), "accumulators were saved"
# Without averaging (Horovod's default) the accumulated gradients are summed.
model = linear(1)
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1), backward_passes_per_step=2), loss="mse")
model.fit(X[mine], Y[mine], batch_size=8, epochs=1, shuffle=False, verbose=0)
summed = np.concatenate([np.ravel(w - 0.2 * g.numpy()) for w, g in zip(w0, grads)])
assert np.allclose(weights(model), summed, rtol=1e-5, atol=1e-6)

# 3. mixed_float16 with an overflow on rank 1 only: no hang, equal loss scales --------------
keras.mixed_precision.set_global_policy("mixed_float16")
try:
    for inject_overflow in (False, True):
        keras.utils.set_random_seed(3)
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8), keras.layers.Dense(1, dtype="float32")])
        opt = hvd.DistributedOptimizer(keras.optimizers.SGD(0.01))
        assert isinstance(opt, hvd.LossScaleOptimizer), type(opt)
        model.compile(optimizer=opt, loss="mse")
        # Small values: no float16 overflow at the initial loss scale 2**15 ...
        x = 0.1 * np.random.RandomState(rank).rand(32, 4).astype("float32")
        y = 0.01 * x.sum(axis=1, keepdims=True)
        if inject_overflow and rank == 1:
            x[0] = 6e4  # ... except on rank 1's first batch: inf in its float16 activations
        model.fit(
            x, y, batch_size=8, epochs=1, shuffle=False, verbose=0,
            callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)],
        )
        scale = float(model.optimizer.dynamic_scale.numpy())
        skipped = 1 if inject_overflow else 0
        assert scale == 2.0**15 / 2**skipped, (inject_overflow, scale)  # every rank skipped rank 1's bad step
        assert int(model.optimizer.iterations) == 4 - skipped, int(model.optimizer.iterations)
        assert np.all(np.isfinite(weights(model)))
        assert_same_on_all_ranks(np.append(weights(model), scale), "weights/loss scale under mixed precision")

    # Optimizer wrapped before the policy was set: Keras wraps it in its own
    # LossScaleOptimizer at compile(); tfring swaps in the agreed one.
    keras.mixed_precision.set_global_policy("float32")
    early = hvd.DistributedOptimizer(keras.optimizers.SGD(0.01))
    keras.mixed_precision.set_global_policy("mixed_float16")
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, dtype="float32")])
    model.compile(optimizer=early, loss="mse")
    assert isinstance(model.optimizer, hvd.LossScaleOptimizer), type(model.optimizer)
finally:
    keras.mixed_precision.set_global_policy("float32")

# 4. Sparse gradients (Embedding): as slices or as dense, same result, same on all ranks ----
ids = np.random.RandomState(10 + rank).randint(0, 20, size=(16, 3))
target = np.random.RandomState(20 + rank).rand(16, 1).astype("float32")
results = []
for sparse_as_dense in (False, True):
    keras.utils.set_random_seed(5)
    model = keras.Sequential(
        [keras.Input((3,), dtype="int32"), keras.layers.Embedding(20, 4), keras.layers.Flatten(), keras.layers.Dense(1)]
    )
    model.compile(
        optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.5), sparse_as_dense=sparse_as_dense), loss="mse"
    )
    with tf.GradientTape() as tape:
        probe = tape.gradient(tf.reduce_sum(model(ids[:2])), model.trainable_variables[0])
    assert isinstance(probe, tf.IndexedSlices), type(probe)
    model.fit(ids, target, batch_size=8, epochs=1, shuffle=False, verbose=0)
    assert_same_on_all_ranks(weights(model), f"embedding weights (sparse_as_dense={sparse_as_dense})")
    results.append(weights(model))
assert np.allclose(results[0], results[1], rtol=1e-5, atol=1e-6)

# 5. jit_compile=True stays on (no warning), the step is XLA-compiled and trains alike ---
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model = linear(2)
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse", jit_compile=True)
    model.fit(X[mine], Y[mine], batch_size=8, epochs=1, verbose=0)
assert model.jit_compile is True, model.jit_compile
assert not [w for w in caught if "jit_compile" in str(w.message)], [str(w.message) for w in caught]
assert_same_on_all_ranks(weights(model), "weights after an XLA-compiled fit")

# 6. Value-level collectives (horovod.tensorflow.keras): tf.Tensor out, eager and in a
#    tf.function, as Horovod (issue 28: they returned NumPy) ------------------------------
values = np.arange(10, dtype=np.float32).reshape(5, 2) * (rank + 1)
scattered = hvd.reducescatter(values, name="keras.reducescatter")
mean_factor = sum(r + 1 for r in range(hvd.size())) / hvd.size()
counts = [5 // hvd.size() + (1 if r < 5 % hvd.size() else 0) for r in range(hvd.size())]
start = sum(counts[:rank])
assert isinstance(scattered, tf.Tensor) and scattered.dtype == tf.float32, type(scattered)
assert np.allclose(scattered.numpy(), np.arange(10, dtype=np.float32).reshape(5, 2)[start:start + counts[rank]] * mean_factor)
case = tf.test.TestCase()
mean = hvd.allreduce(np.float64(rank + 1), name="keras.allreduce")
assert isinstance(mean, tf.Tensor) and mean.dtype == tf.float64 and case.evaluate(mean) == mean_factor, mean
total = hvd.allreduce([rank + 1], op=hvd.Sum, name="keras.allreduce.sum")
assert total.dtype == tf.int32 and total.numpy().tolist() == [sum(r + 1 for r in range(hvd.size()))], total
gathered = hvd.allgather(np.full((rank + 1, 2), rank, np.int64), name="keras.allgather")
assert isinstance(gathered, tf.Tensor) and gathered.shape == (sum(r + 1 for r in range(hvd.size())), 2)
assert case.evaluate(gathered)[:, 0].tolist() == [r for r in range(hvd.size()) for _ in range(r + 1)], gathered
sent = hvd.broadcast(np.full(3, rank, np.float32), hvd.size() - 1, name="keras.broadcast")
assert isinstance(sent, tf.Tensor) and sent.numpy().tolist() == [hvd.size() - 1] * 3, sent


@tf.function
def value_collectives(x):
    return hvd.allreduce(x, op=hvd.Sum, name="keras.fn.allreduce"), hvd.broadcast(x, 0, name="keras.fn.broadcast")


summed, root = value_collectives(tf.constant([float(rank + 1)]))
assert summed.numpy().tolist() == [float(sum(r + 1 for r in range(hvd.size())))] and root.numpy().tolist() == [1.0]

print(f"rank {rank}: keras optimizer OK", flush=True)
