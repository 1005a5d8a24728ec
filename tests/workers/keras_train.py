"""2+ ranks: model.fit with every tfring callback, then checkpoint reload and restore.
argv[1]: a directory shared by the ranks. Prints "rank R: keras train OK"."""

import os
import sys
import warnings

import numpy as np
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

import keras

import tfring
import tfring.keras as hvd
from tests.workers.rank_checks import assert_same_on_all_ranks, flat, rows

hvd.init()
rank, size = hvd.rank(), hvd.size()


def weights(model):
    return flat(model.trainable_variables)
out = sys.argv[1]
keras.utils.set_random_seed(100 + rank)  # a different initialization on every rank


def optimizer_state(model):
    return np.concatenate([np.ravel(np.asarray(v.numpy(), np.float64)) for v in model.optimizer.variables])


rng = np.random.RandomState(0)
X = rng.rand(256, 6).astype("float32")
Y = (X @ rng.rand(6, 3)).argmax(1)
x, y = X[rank::size][:128], Y[rank::size][:128]  # this rank's shard: 4 steps of 32
xv, yv = X[32 * rank : 32 * rank + 32], Y[32 * rank : 32 * rank + 32]


def build():
    return keras.Sequential(
        [
            keras.Input((6,)),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(3, activation="softmax"),
        ]
    )


class Recorder(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.epoch_logs, self.batch_lr, self.epochs, self.begin_weights = [], [], [], None

    def on_train_begin(self, logs=None):
        self.begin_weights = weights(self.model)

    def on_epoch_begin(self, epoch, logs=None):
        self.epochs.append(epoch)

    def on_train_batch_begin(self, batch, logs=None):
        self.batch_lr.append(float(self.model.optimizer.learning_rate.numpy()))

    def on_epoch_end(self, epoch, logs=None):
        self.epoch_logs.append(dict(logs))


# 1. fit with all callbacks ---------------------------------------------------------------
lr = 0.05 * size
model = build()
model.compile(
    optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(lr, momentum=0.9)),
    loss="sparse_categorical_crossentropy",
    metrics=["accuracy"],
)
local_logs, global_logs, lr_rec = Recorder(), Recorder(), Recorder()
ckpt = os.path.join(out, f"ckpt-rank{rank}.keras")
tb_dir = os.path.join(out, f"tb-rank{rank}")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model.fit(
        x,
        y,
        batch_size=32,
        epochs=3,
        shuffle=False,
        validation_data=(xv, yv),
        verbose=0,
        callbacks=[
            hvd.callbacks.BroadcastGlobalVariablesCallback(0),
            local_logs,
            hvd.callbacks.MetricAverageCallback(),
            global_logs,
            hvd.callbacks.LearningRateWarmupCallback(lr, warmup_epochs=2),
            lr_rec,
            hvd.callbacks.ModelCheckpoint(ckpt),
            hvd.callbacks.TensorBoard(tb_dir),
        ],
    )
momentum_warnings = [w for w in caught if "momentum correction skipped" in str(w.message)]
assert len(momentum_warnings) == 1, [str(w.message) for w in caught]
assert_same_on_all_ranks(weights(model), "weights after fit")
assert_same_on_all_ranks(optimizer_state(model), "optimizer state after fit")
assert int(model.optimizer.iterations) == 12
weights_at_checkpoint = weights(model)

# Averaged epoch metrics: equal everywhere and equal to the mean of the local ones.
keys = ["loss", "accuracy", "val_loss", "val_accuracy"]
local = np.array([[logs[k] for k in keys] for logs in local_logs.epoch_logs])
averaged = np.array([[logs[k] for k in keys] for logs in global_logs.epoch_logs])
assert_same_on_all_ranks(averaged, "averaged metrics")
mean_of_local = rows(local).reshape(size, -1).mean(axis=0).reshape(averaged.shape)
assert np.allclose(averaged, mean_of_local, rtol=1e-6, atol=1e-7), (averaged, mean_of_local)
assert not np.allclose(rows(local)[0], rows(local)[-1]), "local metrics should differ"

# Warmup: Horovod's formula before every batch; round values at epoch ends; then constant.
steps = 4
expected = []
for epoch in range(3):
    for batch in range(steps):
        if epoch < 2:
            e = epoch + batch / steps + 1.0 / steps
            expected.append(lr / size * (e * (size - 1) / 2 + 1))
        else:
            expected.append(expected[-1] if expected else lr)
# The last warmup value (epoch 1, batch 3) is lr itself.
assert np.isclose(expected[7], lr)
assert np.allclose(lr_rec.batch_lr, expected, rtol=1e-6), (lr_rec.batch_lr, expected)
assert np.allclose([logs["learning_rate"] for logs in lr_rec.epoch_logs], [expected[3], expected[7], expected[11]], rtol=1e-6)

# Checkpoints and TensorBoard events on rank 0 only; no temporary files left behind.
tfring.barrier()
assert os.path.exists(ckpt) == (rank == 0), (rank, ckpt)
assert os.path.isdir(tb_dir) == (rank == 0), (rank, tb_dir)
if rank == 0:
    events = [f for _, _, files in os.walk(tb_dir) for f in files if f.startswith("events.out.tfevents")]
    assert events, "no TensorBoard event files"
assert not [f for f in os.listdir(out) if ".tmp-" in f], os.listdir(out)

# 2. LearningRateScheduleCallback: staircase, epochs [1, 3) --------------------------------
sched_rec = Recorder()
model.fit(
    x,
    y,
    batch_size=32,
    epochs=4,
    shuffle=False,
    verbose=0,
    callbacks=[
        hvd.callbacks.LearningRateScheduleCallback(lr, lambda epoch: 0.5**epoch, start_epoch=1, end_epoch=3),
        sched_rec,
    ],
)
per_epoch = [sched_rec.batch_lr[i * steps : (i + 1) * steps] for i in range(4)]
assert np.allclose(per_epoch, [[lr] * 4, [lr / 2] * 4, [lr / 4] * 4, [lr / 4] * 4], rtol=1e-6), per_epoch
assert np.allclose([logs["learning_rate"] for logs in sched_rec.epoch_logs], [lr, lr / 2, lr / 4, lr / 4], rtol=1e-6)
assert_same_on_all_ranks(weights(model), "weights after the schedule fit")

# 3. save -> load_model -> continue training -----------------------------------------------
path0 = os.path.join(out, "ckpt-rank0.keras")
plain = keras.models.load_model(path0)
assert not hvd.is_distributed(plain.optimizer) and type(plain.optimizer) is keras.optimizers.SGD
loaded = hvd.load_model(path0)
assert hvd.is_distributed(loaded.optimizer) and isinstance(loaded.optimizer, keras.optimizers.SGD)
assert loaded.optimizer.name == model.optimizer.name
assert int(loaded.optimizer.iterations) == 12
assert np.array_equal(weights(loaded), weights_at_checkpoint)
loaded.fit(
    x, y, batch_size=32, epochs=1, verbose=0, callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)]
)
assert int(loaded.optimizer.iterations) == 16
assert not np.array_equal(weights(loaded), weights_at_checkpoint)
assert_same_on_all_ranks(weights(loaded), "weights after load and continue")

# 4. BackupAndRestore: rank 0 restores and broadcasts -------------------------------------
backup = os.path.join(out, "backup")
first = build()
first.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(0.01)), loss="sparse_categorical_crossentropy")
first.fit(
    x,
    y,
    batch_size=32,
    epochs=2,
    verbose=0,
    callbacks=[
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.BackupAndRestore(backup, delete_checkpoint=False),
    ],
)
tfring.barrier()
if rank == 0:
    assert sorted(os.listdir(backup)) == ["backup-2.weights.h5", "training_metadata.json"], os.listdir(backup)
resumed = build()  # a fresh, different initialization on every rank
resumed.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(0.01)), loss="sparse_categorical_crossentropy")
resume_rec = Recorder()
resumed.fit(
    x, y, batch_size=32, epochs=4, verbose=0, callbacks=[hvd.callbacks.BackupAndRestore(backup), resume_rec]
)
assert resume_rec.epochs == [2, 3], resume_rec.epochs
assert np.array_equal(resume_rec.begin_weights, weights(first)), "restored weights differ from the backup"
assert int(resumed.optimizer.iterations) == 16
assert_same_on_all_ranks(weights(resumed), "weights after restore")
tfring.barrier()
assert not os.path.exists(backup)

print(f"rank {rank}: keras train OK", flush=True)
