"""SyncBatchNormalization at np=N against Keras' BatchNormalization on the global batch in
one process (tests/test_sync_batch_norm.py). Every rank holds the whole global batch (same
seed), normalizes its own rows with SyncBatchNormalization, and computes the single-process
reference on all rows itself. Prints "OK <rank>" or raises."""

import os
import sys

import numpy as np
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

import keras

import tfring.keras as hvd
import tfring.tensorflow as hvd_tf

hvd.init()
rank, size = hvd.rank(), hvd.size()
rows_per_rank = 4
rng = np.random.default_rng(0)
x_global = (rng.normal(size=(rows_per_rank * size, 5, 3)) * [1.0, 3.0, 0.5] + [0.0, 2.0, -1.0]).astype("float32")
x_local = x_global[rank * rows_per_rank:(rank + 1) * rows_per_rank]
upstream = rng.normal(size=x_global.shape).astype("float32")  # a fixed d(loss)/d(output)
ours_rows = slice(rank * rows_per_rank, (rank + 1) * rows_per_rank)


def close(a, b, what, tol=2e-5):
    a, b = np.asarray(a), np.asarray(b)
    if not np.allclose(a, b, atol=tol, rtol=tol):
        raise AssertionError(f"rank {rank}: {what} differs by up to {np.abs(a - b).max():.3g}")


def run(layer, x, upstream_rows, mode):
    x = tf.constant(x)

    def step(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, training=True)
            loss = tf.reduce_sum(y * upstream_rows)
        grads = tape.gradient(loss, [x, layer.gamma, layer.beta])
        return y, grads

    if mode == "function":
        step = tf.function(step)
    return step(x)


for mode in ("eager", "function"):
    reference = keras.layers.BatchNormalization(momentum=0.5)
    synced = hvd.SyncBatchNormalization(momentum=0.5)
    y_ref, (dx_ref, dgamma_ref, dbeta_ref) = run(reference, x_global, upstream, mode)
    y, (dx, dgamma, dbeta) = run(synced, x_local, upstream[ours_rows], mode)
    close(y, y_ref[ours_rows], f"{mode}: output")
    close(dx, dx_ref[ours_rows], f"{mode}: input gradient")
    # gamma/beta gradients: each rank holds its rows' share; their sum is the reference.
    close(hvd_tf.allreduce(dgamma, op=hvd_tf.Sum, name=f"dgamma.{mode}"), dgamma_ref, f"{mode}: gamma gradient")
    close(hvd_tf.allreduce(dbeta, op=hvd_tf.Sum, name=f"dbeta.{mode}"), dbeta_ref, f"{mode}: beta gradient")
    close(synced.moving_mean, reference.moving_mean, f"{mode}: moving mean")
    close(synced.moving_variance, reference.moving_variance, f"{mode}: moving variance")
    # Inference uses the (equal) moving statistics, as Keras does.
    close(synced(x_local, training=False), reference(x_global, training=False)[ours_rows], f"{mode}: inference")

# Masked samples count as absent: rank r masks its last r time steps.
mask = np.ones((rows_per_rank * size, 5), bool)
for r in range(size):
    mask[r * rows_per_rank:(r + 1) * rows_per_rank, 5 - r:] = False
kept = x_global[mask]  # (samples kept, 3)
synced = hvd.SyncBatchNormalization(momentum=0.0)
synced(tf.constant(x_local), training=True, mask=tf.constant(mask[ours_rows]))
close(synced.moving_mean, kept.mean(axis=0), "masked: mean", tol=1e-4)
close(synced.moving_variance, kept.var(axis=0), "masked: variance", tol=1e-4)

# In a model trained by fit, saved and loaded as itself.
model = keras.Sequential([keras.Input((5, 3)), hvd.SyncBatchNormalization(), keras.layers.Flatten(), keras.layers.Dense(1)])
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.05)), loss="mse")
model.fit(x_local, x_local.sum(axis=(1, 2)), batch_size=2, epochs=2, verbose=0,
          callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
stats = [model.layers[0].moving_mean.numpy(), model.layers[0].moving_variance.numpy()]
gathered = hvd_tf.allgather(np.concatenate(stats)[None], name="stats").numpy()
if not np.array_equal(gathered[0], gathered[-1]):
    raise AssertionError(f"rank {rank}: moving statistics differ between ranks after fit")
path = os.path.join(sys.argv[1], f"model.{rank}.keras")
model.save(path)
loaded = keras.models.load_model(path)
if type(loaded.layers[0]) is not hvd.SyncBatchNormalization:
    raise AssertionError(f"rank {rank}: loaded {type(loaded.layers[0])}")
close(loaded.predict(x_local, verbose=0), model.predict(x_local, verbose=0), "loaded model")
print("OK", rank, flush=True)
