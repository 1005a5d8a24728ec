"""Local (unsynchronized) variables at np=N (tests/test_local_variables.py): the Partial tape
and optimizer, register_local_source / register_local_var, scale_local_gradients, and
BroadcastGlobalVariablesCallback(local_variables=). Prints "OK <rank>" or raises."""

import numpy as np
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

import keras

import tfring.keras as hvd
import tfring.tensorflow as hvd_tf

hvd.init()
rank, size = hvd.rank(), hvd.size()


def check(a, b, what):
    a, b = np.asarray(a), np.asarray(b)
    if not np.allclose(a, b, rtol=1e-5, atol=1e-6):
        raise AssertionError(f"rank {rank}: {what}: got {a.ravel()[:4]}..., expected {b.ravel()[:4]}...")


def mean_over_ranks(value, name):
    return hvd_tf.allreduce(tf.constant(value), op=hvd_tf.Average, name=name).numpy()


shared = keras.layers.Dense(3, kernel_initializer="glorot_uniform")
head = keras.layers.Dense(2)
x = tf.constant(np.full((4, 5), rank + 1.0, np.float32) + np.arange(5, dtype=np.float32))
shared.build((None, 5))
head.build((None, 3))
variables = shared.trainable_weights + head.trainable_weights
hvd_tf.broadcast_variables(variables, root_rank=0)  # same weights everywhere; data differs by rank


def loss_fn():
    return tf.reduce_sum(tf.square(head(shared(x))))


with tf.GradientTape() as plain_tape:
    plain_loss = loss_fn()
local_grads = [g.numpy() for g in plain_tape.gradient(plain_loss, variables)]
averaged = [mean_over_ranks(g, f"reference.{i}") for i, g in enumerate(local_grads)]


def tape_gradients(wrap, mode):
    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn()
        tape = wrap(tape)
        return tape.gradient(loss, variables)

    return [g.numpy() for g in (tf.function(step)() if mode == "function" else step())]


for mode in ("eager", "function"):
    grads = tape_gradients(lambda t: hvd_tf.PartialDistributedGradientTape(t, local_layers=[head]), mode)
    for i in (0, 1):
        check(grads[i], averaged[i], f"{mode}: Partial tape, shared gradient {i}")
    for i in (2, 3):
        check(grads[i], local_grads[i] / size, f"{mode}: Partial tape, local gradient {i} (scaled)")

    def unscaled_kernel_only(tape):
        tape = hvd_tf.DistributedGradientTape(tape, scale_local_gradients=False)
        tape.register_local_source(head.kernel)
        return tape

    grads = tape_gradients(unscaled_kernel_only, mode)
    check(grads[2], local_grads[2], f"{mode}: register_local_source, unscaled")
    check(grads[3], averaged[3], f"{mode}: the head's bias is not local")

# Keras optimizers: an SGD(1) step moves each variable by minus its (final) gradient.
for make, scale in ((lambda: hvd.PartialDistributedOptimizer(keras.optimizers.SGD(1.0), local_layers=head), True),
                    (lambda: hvd.DistributedOptimizer(keras.optimizers.SGD(1.0), scale_local_gradients=False), False)):
    optimizer = make()
    if not scale:
        for v in head.trainable_weights:
            optimizer.register_local_var(v)
    before = [v.numpy() for v in variables]
    optimizer.apply([tf.fill(v.shape, float(rank + 1)) for v in variables], variables)
    for i, (v, b) in enumerate(zip(variables, before)):
        step = b - v.numpy()
        expected = (size + 1) / 2 if i < 2 else (rank + 1) / (size if scale else 1)
        check(step, np.full(step.shape, expected), f"optimizer (scale={scale}) step of variable {i}")

# fit: the local head keeps its own weights (not broadcast, not reduced); the rest agree.
keras.utils.set_random_seed(rank)
body, local_head = keras.layers.Dense(8, activation="relu"), keras.layers.Dense(1)
model = keras.Sequential([keras.Input((5,)), body, local_head])
initial_head = [w.numpy() for w in local_head.trainable_weights]
model.compile(optimizer=hvd.PartialDistributedOptimizer(keras.optimizers.SGD(0.01), local_layers=[local_head]),
              loss="mse")
callback = hvd.callbacks.BroadcastGlobalVariablesCallback(0, local_variables=local_head.trainable_weights)
callback.set_model(model)
callback.on_train_begin()
check(local_head.kernel.numpy(), initial_head[0], "the broadcast left the local head alone")
data = np.random.default_rng(rank).normal(size=(32, 5)).astype("float32")
model.fit(data, data.sum(1) * (rank + 1), batch_size=8, epochs=2, verbose=0, callbacks=[callback])
gathered_body = hvd_tf.allgather(body.kernel.numpy()[None], name="body").numpy()
gathered_head = hvd_tf.allgather(local_head.kernel.numpy()[None], name="head").numpy()
if not all(np.array_equal(gathered_body[0], g) for g in gathered_body):
    raise AssertionError(f"rank {rank}: the shared body differs between ranks")
if size > 1 and np.array_equal(gathered_head[0], gathered_head[1]):
    raise AssertionError(f"rank {rank}: the local heads are equal: they were synchronized")
print("OK", rank, flush=True)
