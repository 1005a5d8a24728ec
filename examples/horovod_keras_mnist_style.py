# Horovod's examples/tensorflow2/tensorflow2_keras_mnist.py, written the way Horovod's
# Keras examples are, on scikit-learn's digits (offline) instead of MNIST. The only change
# from a Horovod script is the import line:
#
#   import horovod.tensorflow.keras as hvd     ->     import tfring.keras as hvd
#
#   tfringrun -np 2 python examples/horovod_keras_mnist_style.py
import os
import sys

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

import tfring.keras as hvd

# Horovod: initialize Horovod.
hvd.init()

# Horovod: pin GPU to be used to process local rank (one GPU per process)
gpus = tf.config.experimental.list_physical_devices('GPU')
for gpu in gpus:
    tf.config.experimental.set_memory_growth(gpu, True)
if gpus:
    tf.config.experimental.set_visible_devices(gpus[hvd.local_rank()], 'GPU')
if not gpus:  # two cores shared by every rank
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)

digits = load_digits()
images, labels = digits.images[..., np.newaxis] / 16.0, digits.target
split = int(0.8 * len(images))
dataset = tf.data.Dataset.from_tensor_slices(
    (tf.cast(images[:split], tf.float32), tf.cast(labels[:split], tf.int64))
)
dataset = dataset.repeat().shuffle(1000, seed=hvd.rank()).batch(32)

mnist_model = tf.keras.Sequential([
    tf.keras.Input((8, 8, 1)),
    tf.keras.layers.Conv2D(32, [3, 3], activation='relu'),
    tf.keras.layers.Conv2D(64, [3, 3], activation='relu'),
    tf.keras.layers.MaxPooling2D(pool_size=(2, 2)),
    tf.keras.layers.Dropout(0.25),
    tf.keras.layers.Flatten(),
    tf.keras.layers.Dense(128, activation='relu'),
    tf.keras.layers.Dropout(0.5),
    tf.keras.layers.Dense(10, activation='softmax')
])

# Horovod: adjust learning rate based on number of GPUs.
scaled_lr = 0.001 * hvd.size()
opt = tf.optimizers.Adam(scaled_lr)

# Horovod: add Horovod DistributedOptimizer.
opt = hvd.DistributedOptimizer(
    opt, backward_passes_per_step=1, average_aggregated_gradients=True)

mnist_model.compile(loss=tf.losses.SparseCategoricalCrossentropy(),
                    optimizer=opt,
                    metrics=['accuracy'])

callbacks = [
    # Horovod: broadcast initial variable states from rank 0 to all other processes.
    # This is necessary to ensure consistent initialization of all workers when
    # training is started with random weights or restored from a checkpoint.
    hvd.callbacks.BroadcastGlobalVariablesCallback(0),

    # Horovod: average metrics among workers at the end of every epoch.
    #
    # Note: This callback must be in the list before the ReduceLROnPlateau,
    # TensorBoard or other metrics-based callbacks.
    hvd.callbacks.MetricAverageCallback(),

    # Horovod: using `lr = 1.0 * hvd.size()` from the very beginning leads to worse final
    # accuracy. Scale the learning rate `lr = 1.0` ---> `lr = 1.0 * hvd.size()` during
    # the first three epochs. See https://arxiv.org/abs/1706.02677 for details.
    hvd.callbacks.LearningRateWarmupCallback(initial_lr=scaled_lr, warmup_epochs=3, verbose=1),
]

# Horovod: save checkpoints only on worker 0 to prevent other workers from corrupting them.
if hvd.rank() == 0:
    checkpoint_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join('runs', 'horovod_keras_mnist_style')
    os.makedirs(checkpoint_dir, exist_ok=True)
    callbacks.append(tf.keras.callbacks.ModelCheckpoint(os.path.join(checkpoint_dir, 'checkpoint-{epoch}.keras')))

# Horovod: write logs on worker 0.
verbose = 1 if hvd.rank() == 0 else 0

# Train the model.
# Horovod: adjust number of steps based on number of GPUs.
mnist_model.fit(dataset, steps_per_epoch=200 // hvd.size(), callbacks=callbacks, epochs=8, verbose=verbose)

loss, accuracy = mnist_model.evaluate(images[split:].astype('float32'), labels[split:], verbose=0)
if hvd.rank() == 0:
    print(f'Test accuracy: {accuracy:.4f}')
