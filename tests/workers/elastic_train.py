"""Worker of the elastic tests (tests/test_elastic.py): trains a small Keras model with
``model.fit`` or a custom loop under ``hvd.elastic.run`` and lets the test inject faults.

    python elastic_train.py '<json config>' OUT_DIR

Config keys: mode ("fit" | "loop"), epochs, batches (per epoch, loop mode), commit_every,
sleep_s (per batch), die_worker + die_epoch + die_batch (that worker SIGKILLs itself there,
or SIGSTOPs itself with freeze=true),
crash_hosts (a worker on one of them exits 3 before init, every time), grow_file +
grow_host + grow_epoch (rank 0 of generation 1 appends the host line there, once),
slow_until_generation + slow_s (sleep that long per batch before that generation),
shrink_file + shrink_host (rank 0 of generation 1 removes that host line after batch 2).
Each worker writes OUT_DIR/final_<worker>.npy (its final weights) and prints
``FINAL worker=... rank=... size=... epoch=... iterations=...``; ``T_KILL``, ``T_RESET``
(the job re-formed, before the sync) and ``T_RESUME`` (the first step after a reset ended)
lines carry wall-clock times for tests/measure/elastic_recovery.py.
"""

import json
import os
import signal
import sys
import time

cfg = json.loads(sys.argv[1])
out_dir = sys.argv[2]
worker = os.environ["TFRING_ELASTIC_WORKER"]
if os.environ["TFRING_ELASTIC_HOST"] in cfg.get("crash_hosts", []):
    print(f"worker {worker} crashes on purpose on host {os.environ['TFRING_ELASTIC_HOST']}", flush=True)
    sys.exit(3)

import numpy as np
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
import keras

import tfring.keras as hvd

hvd.init()
rng = np.random.default_rng(0)
x = rng.standard_normal((256, 8)).astype("float32")
y = (x @ rng.standard_normal((8, 1))).astype("float32")
keras.utils.set_random_seed(hvd.rank() + 1)  # different initial weights: sync must fix them
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
epochs = cfg["epochs"]
grown = False
timestamps = {}


def chaos(epoch, batch):
    """The faults and host changes this worker injects after batch ``batch`` of ``epoch``."""
    global grown
    time.sleep(cfg.get("sleep_s", 0.0))
    if hvd.elastic.generation() < cfg.get("slow_until_generation", 0):
        time.sleep(cfg.get("slow_s", 0.0))  # leave time for a new worker to start (it imports TF)
    if worker == cfg.get("die_worker") and epoch == cfg["die_epoch"] and batch == cfg["die_batch"]:
        print(f"worker {worker} (rank {hvd.rank()}) kills itself at epoch {epoch} batch {batch}", flush=True)
        print(f"T_KILL {time.time():.6f}", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP if cfg.get("freeze") else signal.SIGKILL)
    if hvd.elastic.generation() > 1 and "resumed" not in timestamps:
        timestamps["resumed"] = time.time()
        print(f"T_RESUME {timestamps['resumed']:.6f}", flush=True)  # the first step after a reset
    if (cfg.get("grow_file") and not grown and hvd.rank() == 0 and epoch == cfg["grow_epoch"]
            and hvd.elastic.generation() == 1):
        with open(cfg["grow_file"], "a") as f:
            f.write(cfg["grow_host"] + "\n")
        grown = True
    if cfg.get("shrink_file") and not grown and hvd.rank() == 0 and hvd.elastic.generation() == 1 and batch == 2:
        with open(cfg["shrink_file"]) as f:
            kept = [line for line in f if line.strip() != cfg["shrink_host"]]
        with open(cfg["shrink_file"], "w") as f:
            f.writelines(kept)
        grown = True


def on_reset():
    print(f"RESET worker={worker} rank={hvd.rank()} size={hvd.size()}", flush=True)
    print(f"T_RESET {time.time():.6f}", flush=True)


if cfg["mode"] == "fit":
    optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(0.01))
    model.compile(optimizer=optimizer, loss="mse")
    state = hvd.elastic.KerasState(model, batch=0, epoch=0)

    class Chaos(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            chaos(state.epoch, batch)

    callbacks = [hvd.elastic.UpdateEpochStateCallback(state), hvd.elastic.UpdateBatchStateCallback(state),
                 hvd.elastic.CommitStateCallback(state, batches_per_commit=cfg["commit_every"]), Chaos()]

    @hvd.elastic.run
    def train(state):
        model.fit(x, y, batch_size=32, epochs=epochs - state.epoch, callbacks=callbacks, verbose=0, shuffle=False)
else:
    import tfring.tensorflow as hvd_tf

    optimizer = keras.optimizers.SGD(0.01)
    optimizer.build(model.trainable_variables)
    state = hvd_tf.elastic.TensorFlowKerasState(model, optimizer, batch=0, epoch=0)

    @tf.function
    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(xb, training=True) - yb))
        tape = hvd_tf.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @hvd_tf.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):  # noqa: B020 - Horovod's pattern
            for state.batch in range(state.batch, cfg["batches"]):  # noqa: B020
                lo = (state.batch * 32) % len(x)
                step(x[lo:lo + 32], y[lo:lo + 32])
                chaos(state.epoch, state.batch)
                if state.batch % cfg["commit_every"] == 0:
                    state.commit()
            state.batch = 0

state.register_reset_callbacks([on_reset])
train(state)
weights = np.concatenate([w.ravel() for w in model.get_weights()])
np.save(os.path.join(out_dir, f"final_{worker}.npy"), weights)
print(f"FINAL worker={worker} rank={hvd.rank()} size={hvd.size()} epoch={state.epoch} "
      f"iterations={int(optimizer.iterations.numpy())}", flush=True)
