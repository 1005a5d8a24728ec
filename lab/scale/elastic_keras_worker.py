"""The Keras worker of the host soak (``host_soak.py --worker keras``): an elastic
``model.fit`` (tfring.keras: DistributedOptimizer, KerasState, CommitStateCallback) that
prints the same lines as tools/hostlab/elastic_numpy.py:

    python elastic_keras_worker.py '<json config>' OUT_DIR

Config keys: commit_every (batches), sleep_s (per batch), stop_file (training ends at the
first commit after it appears: rank 0 looks, every rank follows). Steps are the optimizer's
iterations. Lines: ``PROGRESS`` (rank 0, at every commit), ``RESTORED`` and ``RESET`` (after
a re-formation: the steps undone since the last commit), ``FINAL`` (with a digest of the
weights); OUT_DIR/final_<worker>.npy holds them.
"""

import hashlib
import json
import os
import sys
import time

import numpy as np
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
import keras

import tfring.keras as hvd

cfg = json.loads(sys.argv[1])
out_dir = sys.argv[2]
worker = os.environ["TFRING_ELASTIC_WORKER"]
hvd.init()
rng = np.random.default_rng(0)
x = rng.standard_normal((2048, 16)).astype("float32")
y = (x @ rng.standard_normal((16, 1))).astype("float32")
keras.utils.set_random_seed(hvd.rank() + 1)  # different initial weights: the sync must fix them
model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu"), keras.layers.Dense(1)])
optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(0.01))
model.compile(optimizer=optimizer, loss="mse")
state = hvd.elastic.KerasState(model, batch=0, epoch=0)
seen = {"iterations": 0}


def iterations():
    return int(model.optimizer.iterations.numpy())


class CommitAndReport(hvd.elastic.CommitStateCallback):
    """Commits, then rank 0 reports progress and whether to stop (broadcast)."""

    def on_train_batch_end(self, batch, logs=None):
        time.sleep(cfg.get("sleep_s", 0.0))
        seen["iterations"] = iterations()
        committing = self._left == 1
        super().on_train_batch_end(batch, logs)
        if committing:
            if hvd.rank() == 0:
                print(f"PROGRESS worker={worker} step={iterations()} size={hvd.size()} t={time.time():.6f}",
                      flush=True)
            stop = hvd.rank() == 0 and os.path.exists(cfg["stop_file"])
            if hvd.broadcast_object(stop, root_rank=0, name="stop"):
                self.model.stop_training = True


def on_reset():
    now = iterations()
    print(f"RESTORED worker={worker} step={now} lost={max(seen['iterations'] - now, 0)} t={time.time():.6f}",
          flush=True)
    print(f"RESET worker={worker} rank={hvd.rank()} size={hvd.size()} step={now} t={time.time():.6f}", flush=True)


state.register_reset_callbacks([on_reset])
callbacks = [hvd.elastic.UpdateEpochStateCallback(state), hvd.elastic.UpdateBatchStateCallback(state),
             CommitAndReport(state, batches_per_commit=cfg["commit_every"])]


@hvd.elastic.run
def train(state):
    model.fit(x, y, batch_size=32, epochs=10 ** 6 - state.epoch, callbacks=callbacks, verbose=0, shuffle=False)


train(state)
weights = np.concatenate([w.ravel() for w in model.get_weights()])
np.save(os.path.join(out_dir, f"final_{worker}.npy"), weights)
print(f"FINAL worker={worker} rank={hvd.rank()} size={hvd.size()} step={iterations()} "
      f"sha={hashlib.sha1(weights.tobytes()).hexdigest()[:16]}", flush=True)
