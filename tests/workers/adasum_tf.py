"""Worker for tests/test_adasum.py at 2 ranks: op=Adasum through tfring.tensorflow (allreduce
eagerly and in a tf.function for every float dtype, grouped_allreduce with per-tensor
coefficients, the gradient, DistributedGradientTape, the TF1 delta optimizer) and
tfring.keras (DistributedOptimizer.apply and one model.fit step), plus every refusal and its
error class. Prints "rank R: adasum tf OK"."""

import numpy as np
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

import keras

import tfring.keras as hvd_keras
import tfring.tensorflow as hvd
from tests.workers.adasum_reference import assert_close, rank_input, tree

hvd.init()
r, n = hvd.rank(), hvd.size()
assert hvd.Adasum == hvd_keras.Adasum == 5  # the core's ReduceOp, read by name


def expect(exc_class, fn, *needles):
    try:
        fn()
    except exc_class as e:
        for needle in needles:
            assert needle in str(e), f"rank {r}: {needle!r} not in: {e}"
    else:
        raise AssertionError(f"rank {r}: expected {exc_class.__name__} from {fn}")


def everyone(shape, salt=0):
    return [rank_input(j, shape, salt) for j in range(n)]


# 1. allreduce, eagerly and in a tf.function, every float dtype.
RTOL = {tf.float16: 1e-2, tf.bfloat16: 5e-2, tf.float32: 1e-5, tf.float64: 1e-12}
reduce_in_function = tf.function(lambda x: hvd.allreduce(x, op=hvd.Adasum, name="in_function"))
for dtype, rtol in RTOL.items():
    for label, fn in (("eager", lambda x: hvd.allreduce(x, op=hvd.Adasum)), ("tf.function", reduce_in_function)):
        x = tf.cast(rank_input(r, (3, 4)), dtype)
        want = tree([tf.cast(v, dtype).numpy().astype(np.float64) for v in everyone((3, 4))])
        got = fn(x)
        assert got.dtype == dtype and got.shape == (3, 4)
        assert_close(f"{label} {dtype.name}", tf.cast(got, tf.float64).numpy(), want, rtol)

# 2. grouped_allreduce: one group, each tensor with its own coefficients (tensor 1 is the
# same on both ranks: its Adasum is itself; a sum or a shared coefficient would not be).
xs = [rank_input(r, (5,), 1), rank_input(0, (4,), 2), rank_input(r, (2, 3), 3)]
wants = [tree(everyone((5,), 1)), rank_input(0, (4,), 2), tree(everyone((2, 3), 3))]
for k, (got, want) in enumerate(zip(hvd.grouped_allreduce([tf.constant(x) for x in xs], op=hvd.Adasum), wants)):
    assert_close(f"grouped tensor {k}", got.numpy(), want, 1e-12)

# 3. The gradient of allreduce(op=Adasum) is the Adasum allreduce of the upstream gradients
# (Horovod's convention): rank j's upstream gradient is c_j.
x = tf.Variable(rank_input(r, (6,), 4))
c = rank_input(r, (6,), 5)
for label, run in (("eager", lambda f: f()), ("tf.function", lambda f: tf.function(f)())):
    def grad():
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(hvd.allreduce(x, op=hvd.Adasum) * c)
        return tape.gradient(loss, x)
    assert_close(f"gradient ({label})", run(grad).numpy(), tree(everyone((6,), 5)), 1e-12)

# 4. DistributedGradientTape(op=Adasum): the local gradients (c_j) combined, not averaged.
w = tf.Variable(np.zeros(6))
with tf.GradientTape() as tape:
    loss = tf.reduce_sum(w * c)
tape = hvd.DistributedGradientTape(tape, op=hvd.Adasum)
assert_close("DistributedGradientTape", tape.gradient(loss, w).numpy(), tree(everyone((6,), 5)), 1e-12)

# 5. Keras DistributedOptimizer(op=Adasum): SGD applies the Adasum of the gradients.
var = keras.Variable(np.zeros((2, 3), np.float32))
opt = hvd_keras.DistributedOptimizer(keras.optimizers.SGD(0.5), op=hvd_keras.Adasum)
opt.apply([tf.constant(rank_input(r, (2, 3), 6), tf.float32)], [var])
assert_close("Keras DistributedOptimizer", var.numpy(), -0.5 * tree(everyone((2, 3), 6)), 1e-5)

# One model.fit step (the whole batch) with DistributedOptimizer(op=Adasum): each variable
# moves by -lr * the Adasum of the ranks' gradients of that variable.
xs = rank_input(r, (8, 3), 8).astype(np.float32)
ys = rank_input(r, (8, 1), 9).astype(np.float32)

model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, kernel_initializer="ones")])
model.compile(optimizer=hvd_keras.DistributedOptimizer(keras.optimizers.SGD(0.1), op=hvd_keras.Adasum), loss="mse")
with tf.GradientTape() as tape:
    local_loss = keras.losses.MeanSquaredError()(ys, model(xs))
local = [g.numpy().ravel() for g in tape.gradient(local_loss, model.trainable_variables)]
gathered = [hvd.allgather(tf.constant(g[None, :])).numpy() for g in local]  # rows: ranks
start = [v.numpy().ravel() for v in model.trainable_variables]
model.fit(xs, ys, batch_size=8, epochs=1, verbose=0, shuffle=False)
for v, s0, rows in zip(model.trainable_variables, start, gathered):
    assert_close(f"fit: {v.name}", v.numpy().ravel(), s0 - 0.1 * tree(list(rows)), 1e-5)

# 6. hvd.DistributedOptimizer(v1 optimizer, op=Adasum): Horovod's delta optimizer, a local
# step then the Adasum of the deltas. Rank j's gradient is c_j (constant), lr 0.5: after one
# step w = -0.5 adasum(c); GradientDescent's second step adds the same again; Momentum(0.9)'s
# second local step is 1.9 times its first (its accumulator stays local).
c7 = rank_input(r, (4,), 7)
step1 = -0.5 * tree(everyone((4,), 7))
graph = tf.Graph()
with graph.as_default():
    w = tf.compat.v1.get_variable("w", initializer=np.zeros(4))
    opt = hvd.DistributedOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.5), op=hvd.Adasum)
    assert type(opt).__name__ == "DistributedAdasumOptimizer", type(opt)
    train = opt.minimize(tf.reduce_sum(w * c7))
    init = tf.compat.v1.global_variables_initializer()
config = tf.compat.v1.ConfigProto(operation_timeout_in_ms=20000)
with tf.compat.v1.Session(graph=graph, config=config) as sess:
    sess.run(init)
    sess.run(train)
    assert_close("TF1 delta optimizer, graph, step 1", sess.run(w), step1, 1e-12)
    sess.run(train)
    assert_close("TF1 delta optimizer, graph, step 2", sess.run(w), 2 * step1, 1e-12)
w = tf.Variable(np.zeros(4))
opt = hvd.DistributedOptimizer(tf.compat.v1.train.MomentumOptimizer(0.5, 0.9), op=hvd.Adasum)
for _ in range(2):
    opt.minimize(lambda: tf.reduce_sum(w * c7), var_list=[w])
assert_close("TF1 delta optimizer, eager Momentum", w.numpy(), 2.9 * step1, 1e-6)  # 0.9 as float32
# Adam's first local step is about -lr * sign(c_j) on each rank: the Adasum of those deltas,
# not the step Adam would take on Adasum-combined gradients (which the cases above cannot
# tell apart, their optimizers being linear in the gradient).
w = tf.Variable(np.zeros(4))
hvd.DistributedOptimizer(tf.compat.v1.train.AdamOptimizer(0.1), op=hvd.Adasum).minimize(
    lambda: tf.reduce_sum(w * c7), var_list=[w])
adam_delta = [-0.1 * np.sqrt(0.001) * c / (np.sqrt(0.001 * c * c) + 1e-8) for c in everyone((4,), 7)]
assert_close("TF1 delta optimizer, eager Adam", w.numpy(), tree(adam_delta), 1e-6)

# 7. Refusals.
expect(tf.errors.UnimplementedError, lambda: hvd.allreduce(tf.constant([1, 2]), op=hvd.Adasum), "int32", "float")
expect(NotImplementedError, lambda: hvd.allreduce(tf.IndexedSlices(tf.ones((1, 3)), tf.constant([0])), op=hvd.Adasum),
       "sparse_as_dense=True")
expect(NotImplementedError, lambda: hvd.grouped_allreduce(
    [tf.ones(2), tf.IndexedSlices(tf.ones((1, 3)), tf.constant([0]))], op=hvd.Adasum), "sparse_as_dense=True")
expect(tf.errors.UnimplementedError, lambda: hvd.reducescatter(tf.ones((2, 2)), op=hvd.Adasum), "allreduce only")
expect(ValueError, lambda: hvd_keras.DistributedOptimizer(keras.optimizers.SGD(), op=hvd.Adasum,
                                                          backward_passes_per_step=2,
                                                          average_aggregated_gradients=True),
       "average_aggregated_gradients")
expect(ValueError, lambda: hvd_keras.DistributedOptimizer(keras.optimizers.SGD(), op=hvd.Adasum,
                                                          gradient_predivide_factor=2.0), "op=Average")
strategy = tf.distribute.OneDeviceStrategy("/cpu:0")  # it would reduce instead of Adasum
with strategy.scope():
    var = keras.Variable(np.zeros(3, np.float32))
    opt = hvd_keras.DistributedOptimizer(keras.optimizers.SGD(1.0), op=hvd_keras.Adasum)
    opt.build([var])
expect(ValueError, lambda: strategy.run(tf.function(lambda: opt.apply([tf.ones(3)], [var]))),
       "tf.distribute strategy", "OneDeviceStrategy")
print(f"rank {r}: adasum tf OK", flush=True)
