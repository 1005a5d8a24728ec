# Elastic Keras training on scikit-learn's digits (offline), written as Horovod's elastic
# Keras examples are (examples/elastic/tensorflow2/tensorflow2_keras_mnist_elastic.py); the
# only change from a Horovod script is the import line. The job goes on when a worker is
# lost (the survivors restore the last commit and re-form) and grows when hosts appear:
#
#   tfringrun -np 3 --min-np 2 --max-np 3 python examples/keras_elastic.py
#   tfringrun --min-np 2 --max-np 8 --host-discovery-script ./discover_hosts.sh \
#       python examples/keras_elastic.py
#
# The learning rate and the data shard follow the world size, which changes: both are set
# again in a reset callback (Horovod's recipe; the choice is yours, docs/elastic.md).
import argparse

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

import tfring.keras as hvd

parser = argparse.ArgumentParser(description="Elastic Keras training on digits")
parser.add_argument("--epochs", type=int, default=8)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--base-lr", type=float, default=0.001, help="learning rate of one worker")
parser.add_argument("--batches-per-commit", type=int, default=5)
args = parser.parse_args()

# Horovod: initialize Horovod (an elastic worker waits here for its place in the job).
hvd.init()
tf.config.threading.set_intra_op_parallelism_threads(1)  # small CPU machines: one thread per rank
tf.config.threading.set_inter_op_parallelism_threads(1)

digits = load_digits()
images = (digits.images[..., np.newaxis] / 16.0).astype("float32")
labels = digits.target.astype("int64")
split = int(0.8 * len(images))
x_train, y_train, x_test, y_test = images[:split], labels[:split], images[split:], labels[split:]

model = tf.keras.Sequential([
    tf.keras.Input((8, 8, 1)),
    tf.keras.layers.Conv2D(32, [3, 3], activation="relu"),
    tf.keras.layers.MaxPooling2D(pool_size=(2, 2)),
    tf.keras.layers.Flatten(),
    tf.keras.layers.Dense(64, activation="relu"),
    tf.keras.layers.Dense(10, activation="softmax"),
])

# Horovod: adjust learning rate based on number of workers (again at every reset below).
opt = tf.optimizers.Adam(args.base_lr * hvd.size())
opt = hvd.DistributedOptimizer(opt)
model.compile(loss=tf.losses.SparseCategoricalCrossentropy(), optimizer=opt, metrics=["accuracy"])

# Horovod: the state to keep across resets: the model, its optimizer and two counters.
state = hvd.elastic.KerasState(model, batch=0, epoch=0)


def on_state_reset():
    # Horovod: the world size changed: scale the learning rate to it.
    state.model.optimizer.learning_rate.assign(args.base_lr * hvd.size())
    print(f"reset: rank {hvd.rank()} of {hvd.size()}, learning rate {args.base_lr * hvd.size():g}", flush=True)


state.register_reset_callbacks([on_state_reset])

callbacks = [
    # Horovod: average metrics among workers at the end of every epoch.
    hvd.callbacks.MetricAverageCallback(),
    # Horovod: keep the epoch and batch counters, and commit the state every few batches
    # and at each epoch's end (the commit comes last, so it holds the counters).
    hvd.elastic.UpdateEpochStateCallback(state),
    hvd.elastic.UpdateBatchStateCallback(state),
    hvd.elastic.CommitStateCallback(state, batches_per_commit=args.batches_per_commit),
]


@hvd.elastic.run
def train(state):
    # Horovod: each worker reads its shard of the current world (rank and size change).
    x, y = x_train[hvd.rank()::hvd.size()], y_train[hvd.rank()::hvd.size()]
    steps = len(x_train) // (args.batch_size * hvd.size())  # equal on every worker
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().shuffle(1000, seed=hvd.rank())
    model.fit(dataset.batch(args.batch_size), steps_per_epoch=steps, epochs=args.epochs - state.epoch,
              callbacks=callbacks, verbose=2 if hvd.rank() == 0 else 0)


train(state)
loss, accuracy = model.evaluate(x_test, y_test, verbose=0)
if hvd.rank() == 0:
    print(f"Test accuracy: {accuracy:.4f} (world size {hvd.size()} at the end)")
