"""Every save API of a one-process script, under RingStrategy, into folders that exist,
that do not exist yet, and nested ones that do not exist yet, repeated: each rank must see
what one plain process sees (tests/test_strategy_checkpoints.py runs this script in one
process and at np=2 and np=3, and compares).

  save_folders.py DIR ROUNDS

Keras' ModelCheckpoint and BackupAndRestore check whether the folder exists and then
create it (os.makedirs without exist_ok): run on every rank at once, right after the
step's allreduce has lined the ranks up, one rank got FileExistsError (issue 47, item 1).

Prints one ``RESULT <round> | <api> | <folder case> | <outcome>`` line per save, where the
outcome is ``OK <files>`` (the files under the case's folder, relative, after the save) or
``<module.class>: <message>`` with DIR written as ``<DIR>``; then ``DONE``.
"""

import os
import sys

import numpy as np
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

import keras

import tfring

out, rounds = sys.argv[1], int(sys.argv[2])
strategy = tfring.RingStrategy()
with strategy.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
x, y = np.ones((8, 4), "float32"), np.ones((8, 2), "float32")


def fit(callback):
    with strategy.scope():
        model.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[callback])


class Module(tf.Module):
    def __init__(self):
        super().__init__()
        self.v = tf.Variable(1.0)

    @tf.function(input_signature=[])
    def read(self):
        return self.v


module = Module()
checkpoint = tf.train.Checkpoint(model=model)

# (api, save into folder `d`): each writes somewhere under d, which may not exist yet
SAVES = [
    ("model.save", lambda d: model.save(os.path.join(d, "m.keras"))),
    ("model.save_weights", lambda d: model.save_weights(os.path.join(d, "m.weights.h5"))),
    ("ModelCheckpoint", lambda d: fit(keras.callbacks.ModelCheckpoint(os.path.join(d, "ckpt-{epoch}.keras")))),
    ("ModelCheckpoint weights", lambda d: fit(keras.callbacks.ModelCheckpoint(
        os.path.join(d, "w-{epoch}.weights.h5"), save_weights_only=True))),
    ("BackupAndRestore", lambda d: fit(keras.callbacks.BackupAndRestore(d, delete_checkpoint=False))),
    ("tf.train.Checkpoint", lambda d: checkpoint.save(os.path.join(d, "ckpt"))),
    ("CheckpointManager", lambda d: tf.train.CheckpointManager(checkpoint, d, max_to_keep=2).save()),
    ("tf.saved_model.save", lambda d: tf.saved_model.save(module, d)),
]
CASES = {
    "existing": lambda base: base,
    "missing": lambda base: os.path.join(base, "new"),
    "nested missing": lambda base: os.path.join(base, "a", "b", "c"),
}


def files_under(folder):
    found = []
    for root, _, names in os.walk(folder):
        found += [os.path.relpath(os.path.join(root, n), folder) for n in names]
    return sorted(found)


def outcome(save, folder):
    try:
        save(folder)
    except Exception as e:  # noqa: BLE001 - the test compares the class and message
        return f"{type(e).__module__}.{type(e).__qualname__}: {str(e).replace(out, '<DIR>')}"
    return f"OK {files_under(folder)}"


for r in range(rounds):
    for api, save in SAVES:
        for case, folder_of in CASES.items():
            base = os.path.join(out, f"round-{r}", api.replace(" ", "_").replace(".", "_"), case.replace(" ", "_"))
            if case == "existing":
                os.makedirs(base, exist_ok=True)  # the script made it earlier (every rank: exist_ok)
            print(f"RESULT {r} | {api} | {case} | {outcome(save, folder_of(base))}", flush=True)
print("DONE", tfring.allreduce(np.ones(1), op=tfring.Sum).tolist(), flush=True)
