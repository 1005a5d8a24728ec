# A script in the style of Horovod's examples/tensorflow2/tensorflow2_keras_mnist.py and
# examples/keras/keras_mnist.py (Horovod 0.28, Keras 2 era), on scikit-learn's digits.
# It does not run as written (no horovod, Keras-2 arguments): tests/test_migrate.py runs
# `tfring-migrate --write` on a copy and then trains it with:
#   horovodrun -np 2 python horovod_tf2_keras.py
import os
import sys

import horovod.tensorflow.keras as hvd
import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits
from tensorflow import keras

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

# Horovod: initialize Horovod.
hvd.init()

# Horovod: pin GPU to be used to process local rank (one GPU per process)
gpus = tf.config.experimental.list_physical_devices('GPU')
for gpu in gpus:
    tf.config.experimental.set_memory_growth(gpu, True)
if gpus:
    tf.config.experimental.set_visible_devices(gpus[hvd.local_rank()], 'GPU')

digits = load_digits()
images = (digits.images / 16.0).astype("float32")[..., np.newaxis]
labels = digits.target.astype("int64")
# Horovod: each rank takes its own shard.
images, labels = images[hvd.rank()::hvd.size()], labels[hvd.rank()::hvd.size()]
batch_size = 32


def batches():
    rng = np.random.default_rng(hvd.rank())
    while True:
        idx = rng.integers(0, len(images), batch_size)
        yield images[idx], labels[idx]


keras.utils.set_random_seed(1234 + hvd.rank())  # different initial weights: the broadcast must fix them
model = keras.Sequential([
    keras.Input((8, 8, 1)),
    keras.layers.Conv2D(16, (3, 3), activation='relu'),
    keras.layers.Flatten(),
    keras.layers.Dense(64, activation='relu'),
    keras.layers.Dense(10, activation='softmax'),
])

# Horovod: adjust learning rate based on number of GPUs.
scaled_lr = 0.5 * hvd.size()
opt = keras.optimizers.Adadelta(lr=scaled_lr)

# Horovod: add Horovod DistributedOptimizer.
opt = hvd.DistributedOptimizer(opt)

# Horovod: Specify `experimental_run_tf_function=False` to ensure TensorFlow
# uses hvd.DistributedOptimizer() to compute gradients.
model.compile(loss=keras.losses.SparseCategoricalCrossentropy(),
              optimizer=opt,
              metrics=['accuracy'],
              experimental_run_tf_function=False)

callbacks = [
    # Horovod: broadcast initial variable states from rank 0 to all other processes.
    hvd.callbacks.BroadcastGlobalVariablesCallback(0),
    # Horovod: average metrics among workers at the end of every epoch.
    hvd.callbacks.MetricAverageCallback(),
    # Horovod: using `lr = 1.0 * hvd.size()` from the very beginning leads to worse final
    # accuracy. Scale the learning rate `lr = 1.0` ---> `lr = 1.0 * hvd.size()` during
    # the first three epochs.
    hvd.callbacks.LearningRateWarmupCallback(initial_lr=scaled_lr, warmup_epochs=2, verbose=1),
]

# Horovod: save checkpoints only on worker 0 to prevent other workers from corrupting them.
if hvd.rank() == 0:
    callbacks.append(keras.callbacks.ModelCheckpoint(os.path.join(sys.argv[1], 'checkpoint-{epoch}.h5')))

# Horovod: write logs on worker 0.
verbose = 1 if hvd.rank() == 0 else 0

history = model.fit_generator(batches(), steps_per_epoch=40 // hvd.size(), callbacks=callbacks,
                              epochs=4, verbose=verbose, workers=1, use_multiprocessing=False)

checksum = float(sum(np.abs(w).sum() for w in model.get_weights()))
print("RESULT rank=%d lr=%.4f loss0=%.4f loss=%.4f checksum=%.6f"
      % (hvd.rank(), float(keras.ops.convert_to_numpy(model.optimizer.lr)), history.history['loss'][0],
         history.history['loss'][-1], checksum))
