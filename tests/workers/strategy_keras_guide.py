"""The fault-tolerance pattern of the Keras guide "Multi-GPU distributed training with
TensorFlow" (keras.io/guides/distributed_training_with_tensorflow), with RingStrategy in
place of MirroredStrategy and generated data in place of MNIST; then every other way a
save or a load can create variables under the strategy, on every rank or on one.
Run by tests/test_strategy_checkpoints.py under tfringrun:

  strategy_keras_guide.py DIR

The guide's part: ``run_training`` builds (or restores the newest ``.keras`` file with
``keras.models.load_model``), compiles and fits inside ``strategy.scope()`` with
``ModelCheckpoint(DIR/ckpt/ckpt-{epoch}.keras, save_freq="epoch")``, twice. Keras creates
throwaway variables while saving and loading a ``.keras`` file (a reference optimizer, once
per process); before the fix only the saving rank created them, under a collective.

Last, the save pattern of TF's multi-worker tutorial (multi_worker_with_keras), which
decides who writes from ``strategy.cluster_resolver``: the chief saves the real path, the
others a temporary copy that they delete, then every rank loads the chief's file at once.

Every rank prints "rank R: <what> OK" lines that the test looks for.
"""

import os
import sys
import time

import numpy as np
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

import keras

import tfring
from tfring._saving import atomic

out_dir = sys.argv[1]
checkpoint_dir = os.path.join(out_dir, "ckpt")
rank = None  # set by the first RingStrategy()


def ok(what):
    print(f"rank {rank}: {what} OK", flush=True)


def flat(values):
    return np.concatenate([np.ravel(np.asarray(v, np.float64)) for v in values])


def assert_same_on_all_ranks(values, what):
    got = tfring.allgather(flat(values).reshape(1, -1))
    for r in range(1, got.shape[0]):
        assert np.array_equal(got[0], got[r]), f"{what}: rank {r} differs from rank 0"


# --- the guide, as written, with MirroredStrategy -> RingStrategy and generated data --------
def get_compiled_model():
    inputs = keras.Input(shape=(784,))
    x = keras.layers.Dense(256, activation="relu")(inputs)
    x = keras.layers.Dense(256, activation="relu")(x)
    outputs = keras.layers.Dense(10)(x)
    model = keras.Model(inputs, outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[keras.metrics.SparseCategoricalAccuracy()],
    )
    return model


def get_dataset():
    batch_size = 32
    rng = np.random.default_rng(0)
    x = rng.random((384, 784), dtype=np.float32)
    y = (x[:, :10].argmax(1)).astype("float32")
    return (
        tf.data.Dataset.from_tensor_slices((x[:256], y[:256])).batch(batch_size),
        tf.data.Dataset.from_tensor_slices((x[256:], y[256:])).batch(batch_size),
    )


os.makedirs(checkpoint_dir, exist_ok=True)
train_dataset, val_dataset = get_dataset()
STEPS = 256 // 32


def make_or_restore_model():
    checkpoints = [checkpoint_dir + "/" + name for name in os.listdir(checkpoint_dir)]
    if checkpoints:
        latest_checkpoint = max(checkpoints, key=os.path.getctime)
        print(f"rank {rank}: restoring from {os.path.basename(latest_checkpoint)}", flush=True)
        return keras.models.load_model(latest_checkpoint)
    print(f"rank {rank}: creating a new model", flush=True)
    return get_compiled_model()


def run_training(epochs=1):
    global rank
    strategy = tfring.RingStrategy()
    rank = tfring.rank()
    with strategy.scope():
        model = make_or_restore_model()
        callbacks = [keras.callbacks.ModelCheckpoint(filepath=checkpoint_dir + "/ckpt-{epoch}.keras",
                                                     save_freq="epoch")]
        model.fit(train_dataset, epochs=epochs, callbacks=callbacks, validation_data=val_dataset, verbose=0)
    return strategy, model


strategy, first = run_training(epochs=2)
assert sorted(os.listdir(checkpoint_dir)) == ["ckpt-1.keras", "ckpt-2.keras"], os.listdir(checkpoint_dir)
assert_same_on_all_ranks(first.get_weights(), "weights after the first run_training")
ok("guide: first run_training")
_, second = run_training(epochs=1)  # resumes from ckpt-2.keras, writes ckpt-1.keras again
assert int(second.optimizer.iterations.numpy()) == 3 * STEPS, int(second.optimizer.iterations.numpy())
assert_same_on_all_ranks(second.get_weights() + [v.numpy() for v in second.optimizer.variables],
                         "weights and optimizer state after the second run_training")
ok("guide: second run_training resumed")
with strategy.scope():  # every checkpoint loads, inside the scope, on every rank
    newest = keras.models.load_model(os.path.join(checkpoint_dir, "ckpt-1.keras"))
for a, b in zip(newest.get_weights(), second.get_weights()):
    np.testing.assert_array_equal(a, b)
ok("guide: checkpoints load")


# --- TF's multi-worker tutorial: who writes comes from the cluster resolver --------------------
# (before any save made on one rank only: a rank matches its own path's save with rank 0's
# save of the same ordinal, which gated saves would shift)
def _is_chief(task_type, task_id):
    return task_type == "chief" or (task_type == "worker" and task_id == 0) or task_type is None


def write_filepath(filepath, task_type, task_id):
    dirpath, base = os.path.dirname(filepath), os.path.basename(filepath)
    if not _is_chief(task_type, task_id):
        dirpath = os.path.join(dirpath, "workertemp_" + str(task_id))
        tf.io.gfile.makedirs(dirpath)
    return os.path.join(dirpath, base)


task_type, task_id = strategy.cluster_resolver.task_type, strategy.cluster_resolver.task_id
assert (task_type, task_id) == ("worker", rank), (task_type, task_id)
model_path = os.path.join(out_dir, "tutorial", "keras-model.keras")
# The tutorial saves into '/tmp', which exists; its folder exists here too before anyone saves
# (without this line rank 0's save depended on rank 1's makedirs of workertemp_1 winning a race,
# and failed with FileNotFoundError as one process would when it lost).
os.makedirs(os.path.dirname(model_path), exist_ok=True)
if rank == 0:  # the chief's file system is slow: the others must not read before it is complete
    atomic.before_rename = lambda path: time.sleep(2)
second.save(write_filepath(model_path, task_type, task_id))
atomic.before_rename = None
if not _is_chief(task_type, task_id):
    tf.io.gfile.rmtree(os.path.dirname(write_filepath(model_path, task_type, task_id)))
for a, b in zip(keras.models.load_model(model_path).get_weights(), second.get_weights()):
    np.testing.assert_array_equal(a, b)
if rank:  # its temporary copy deleted, rank 0's write complete (no temporary file left)
    assert os.listdir(os.path.dirname(model_path)) == ["keras-model.keras"], os.listdir(os.path.dirname(model_path))
ok("TF multi-worker tutorial: chief writes, the others read it right after")

# --- every other save and load that can create variables under the strategy -------------
x = np.random.default_rng(1).random((64, 784), dtype=np.float32)
y = np.zeros(64, "float32")
extras = os.path.join(out_dir, "extras")
os.makedirs(extras, exist_ok=True)
with strategy.scope():
    model = get_compiled_model()
    model.fit(x, y, batch_size=32, epochs=1, verbose=0)
    if rank == 0:  # a save and a load only rank 0 makes, inside the scope
        model.save(os.path.join(extras, "rank0.keras"))
        keras.models.load_model(os.path.join(extras, "rank0.keras"))
        ckpt = tf.train.Checkpoint(model=model)  # its save_counter is created by the save
        ckpt.save(os.path.join(extras, "rank0-tf", "ckpt"))
        tf.train.Checkpoint(model=model).restore(os.path.join(extras, "rank0-tf", "ckpt-1")).assert_consumed()
    tfring.barrier()
    ok("saves and loads on rank 0 only")
    if rank == tfring.size() - 1:  # ... and on the last rank only
        alone = keras.models.load_model(os.path.join(extras, "rank0.keras"))
        alone.load_weights(os.path.join(checkpoint_dir, "ckpt-1.keras"))
    tfring.barrier()
    ok("loads on the last rank only")
    ckpt = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    manager = tf.train.CheckpointManager(ckpt, os.path.join(extras, "tf"), max_to_keep=2)
    path = manager.save()
    restored = get_compiled_model()
    restored.optimizer.build(restored.trainable_variables)
    tf.train.Checkpoint(model=restored, optimizer=restored.optimizer).restore(path).assert_consumed()
    model.fit(x, y, batch_size=32, epochs=2, verbose=0,
              callbacks=[keras.callbacks.BackupAndRestore(os.path.join(extras, "backup"), save_freq="epoch",
                                                         delete_checkpoint=False)])
    tf.saved_model.save(model, os.path.join(extras, "saved_model"))
    loaded = tf.saved_model.load(os.path.join(extras, "saved_model"))
assert_same_on_all_ranks(model.get_weights() + restored.get_weights(), "model and restored weights")
served = next(iter(loaded.signatures["serving_default"](tf.constant(x[:4])).values()))
np.testing.assert_allclose(served.numpy(), model(x[:4]).numpy(), rtol=1e-6)
ok("tf.train.Checkpoint, BackupAndRestore, SavedModel inside the scope")
renames = []  # files this rank moved into place (tfring.saving's test hook)
atomic.before_rename = renames.append
model.save(os.path.join(extras, "outside.keras"))  # outside the scope
keras.models.save_model(model, os.path.join(extras, "alias.keras"))  # the public alias, on every rank
atomic.before_rename = None
assert renames == ([os.path.join(extras, "outside.keras"), os.path.join(extras, "alias.keras")] if rank == 0
                   else []), renames
outside = keras.models.load_model(os.path.join(extras, "outside.keras"))
assert_same_on_all_ranks(outside.get_weights(), "a model loaded outside the scope")
ok("saves and loads outside the scope")

