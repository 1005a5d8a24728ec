# A script in the style of TensorFlow's multi_worker_with_keras tutorial: TF_CONFIG and
# MultiWorkerMirroredStrategy. tests/test_migrate.py migrates a copy and runs it with
# tfringrun -np 2 (one process per worker; tfringrun replaces TF_CONFIG).

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

strategy = tf.distribute.MultiWorkerMirroredStrategy()
print("replicas in sync:", strategy.num_replicas_in_sync)

digits = load_digits()
x = (digits.images / 16.0).astype("float32").reshape(-1, 64)
y = digits.target.astype("int64")
global_batch = 32 * strategy.num_replicas_in_sync
dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2000, seed=1).repeat().batch(global_batch)

with strategy.scope():
    model = tf.keras.Sequential([
        tf.keras.Input((64,)),
        tf.keras.layers.Dense(64, activation="relu"),
        tf.keras.layers.Dense(10),
    ])
    model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  optimizer=tf.keras.optimizers.SGD(lr=0.1), metrics=["accuracy"])

history = model.fit(dataset, epochs=3, steps_per_epoch=20, verbose=2)
checksum = float(sum(np.abs(w).sum() for w in model.get_weights()))
print("RESULT loss0=%.4f loss=%.4f checksum=%.6f" % (history.history["loss"][0], history.history["loss"][-1], checksum))
