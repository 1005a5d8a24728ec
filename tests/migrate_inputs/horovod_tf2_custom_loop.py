# A script in the style of Horovod's examples/tensorflow2/tensorflow2_mnist.py (Horovod
# 0.28), on scikit-learn's digits. tests/test_migrate.py migrates a copy and trains it with:
#   horovodrun -np 2 --gloo python horovod_tf2_custom_loop.py

import horovod.tensorflow as hvd
import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)

# Horovod: initialize Horovod.
hvd.init()

digits = load_digits()
dataset = tf.data.Dataset.from_tensor_slices(
    (tf.cast(digits.images[..., tf.newaxis] / 16.0, tf.float32), tf.cast(digits.target, tf.int64)))
dataset = dataset.shard(hvd.size(), hvd.rank()).repeat().shuffle(256, seed=hvd.rank()).batch(32)

tf.random.set_seed(99 + hvd.rank())
mnist_model = tf.keras.Sequential([
    tf.keras.layers.Conv2D(16, [3, 3], activation='relu'),
    tf.keras.layers.Flatten(),
    tf.keras.layers.Dense(64, activation='relu'),
    tf.keras.layers.Dense(10, activation='softmax')
])
loss = tf.losses.SparseCategoricalCrossentropy()
train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy()

# Horovod: adjust learning rate based on number of GPUs.
opt = tf.optimizers.Adam(lr=0.001 * hvd.size())


@tf.function
def training_step(images, labels, first_batch):
    with tf.GradientTape() as tape:
        probs = mnist_model(images, training=True)
        loss_value = loss(labels, probs)

    # Horovod: add Horovod Distributed GradientTape.
    tape = hvd.DistributedGradientTape(tape)

    grads = tape.gradient(loss_value, mnist_model.trainable_variables)
    opt.apply_gradients(zip(grads, mnist_model.trainable_variables))
    train_accuracy.update_state(labels, probs)

    # Horovod: broadcast initial variable states from rank 0 to all other processes.
    # This is necessary to ensure consistent initialization of all workers when
    # training is started with random weights or restored from a checkpoint.
    #
    # Note: broadcast should be done after the first gradient step to ensure optimizer
    # initialization.
    if first_batch:
        hvd.broadcast_variables(mnist_model.variables, root_rank=0)
        hvd.broadcast_variables(opt.variables(), root_rank=0)

    return loss_value


losses = []
# Horovod: adjust number of steps based on number of GPUs.
for batch, (images, labels) in enumerate(dataset.take(120 // hvd.size())):
    loss_value = training_step(images, labels, batch == 0)
    losses.append(float(loss_value))
    if batch % 20 == 0 and hvd.local_rank() == 0:
        print('Step #%d\tLoss: %.6f\taccuracy: %.3f' % (batch, loss_value, train_accuracy.result()))
        train_accuracy.reset_states()

checksum = float(sum(np.abs(v.numpy()).sum() for v in mnist_model.variables))
print("RESULT rank=%d loss0=%.4f loss=%.4f checksum=%.6f"
      % (hvd.rank(), np.mean(losses[:5]), np.mean(losses[-5:]), checksum))
