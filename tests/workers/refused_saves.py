"""Saves that the writer refuses, made on every rank of a RingStrategy script (issue 40),
and the same script in one plain process: tests/test_strategy_checkpoints.py checks that
every rank raises what the single process raises (class and message), that the message
names the user's path, and that the job goes on.

  refused_saves.py DIR     DIR/a_file must exist (a file: nothing can be written under it)

Prints one ``RESULT <what> | <module.class> | <message> | args <n>`` line per save, then
``DONE``.
"""

import os
import sys

import numpy as np
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

import keras

import tfring

out = sys.argv[1]
strategy = tfring.RingStrategy()
with strategy.scope():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss="mse")
model.fit(np.ones((8, 4), "float32"), np.ones((8, 2), "float32"), batch_size=4, verbose=0)
under_a_file = os.path.join(out, "a_file")


class NotTrackable:
    def __repr__(self):  # the same text in every process (the default repr holds an address)
        return "NotTrackable()"


saves = [
    ("model.save", lambda: model.save(os.path.join(out, "tf_save"))),  # save_and_load.ipynb: no suffix
    ("model.save_weights", lambda: model.save_weights(os.path.join(out, "weights.h5"))),
    ("model.export", lambda: model.export(os.path.join(under_a_file, "exported"))),
    ("tf.saved_model.save", lambda: tf.saved_model.save(NotTrackable(), os.path.join(out, "saved_model"))),
    ("tf.train.Checkpoint.save", lambda: tf.train.Checkpoint(model=model).save(os.path.join(under_a_file, "ckpt"))),
]
for what, save in saves:
    try:
        save()
    except Exception as e:  # noqa: BLE001 - the test compares the class and message
        name = f"{type(e).__module__}.{type(e).__qualname__}"
        print(f"RESULT {what} | {name} | {str(e)!r} | args {len(e.args)}", flush=True)
    else:
        print(f"RESULT {what} | no error", flush=True)
model.save(os.path.join(out, "works.keras"))  # the job goes on: a save that works, a collective
print("DONE", tfring.allreduce(np.ones(1), op=tfring.Sum).tolist(), flush=True)
