# A script in the style of Horovod's examples/ray/tensorflow2_mnist_ray.py (Horovod 0.28):
# RayExecutor.create_settings(timeout_s=30), RayExecutor(settings, ...), start(), run(train),
# shutdown(); scikit-learn's digits instead of an MNIST download, a checkpoint folder and a
# RESULT line per rank added so a test can check it. It does not run as written (no horovod):
# tests/test_ray.py runs `tfring-migrate --write` on a copy and then runs it, starting its own Ray:
#   python horovod_ray_tf2_mnist.py --num-hosts 1 --num-workers-per-host 2 --checkpoint-dir DIR
import argparse
import os

import tensorflow as tf
import horovod.tensorflow.keras as hvd

import ray
from horovod.ray import RayExecutor

parser = argparse.ArgumentParser(
    description='Tensorflow Ray example',
    formatter_class=argparse.ArgumentDefaultsHelpFormatter)
parser.add_argument('--address', type=str, help="Ray cluster address")
parser.add_argument('--num-workers', type=int, default=None)
parser.add_argument('--num-hosts', type=int, default=None)
parser.add_argument('--num-workers-per-host', type=int, default=1)
parser.add_argument('--epochs', type=int, default=2)
parser.add_argument('--checkpoint-dir', type=str, default='.')


def train(num_epochs, checkpoint_dir):
    import numpy as np
    from sklearn.datasets import load_digits

    # Horovod: initialize Horovod.
    hvd.init()

    # Horovod: pin GPU to be used to process local rank (one GPU per process)
    gpus = tf.config.experimental.list_physical_devices('GPU')
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    if gpus:
        tf.config.experimental.set_visible_devices(gpus[hvd.local_rank()], 'GPU')

    digits = load_digits()
    images, labels = digits.images[hvd.rank()::hvd.size()], digits.target[hvd.rank()::hvd.size()]
    dataset = tf.data.Dataset.from_tensor_slices(
        (tf.cast(images[..., tf.newaxis] / 16.0, tf.float32),
         tf.cast(labels, tf.int64)))
    dataset = dataset.repeat().shuffle(1000, seed=hvd.rank()).batch(32)

    tf.keras.utils.set_random_seed(1234 + hvd.rank())  # different initial weights: the broadcast must fix them
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
    opt = hvd.DistributedOptimizer(opt)

    # Horovod: Specify `experimental_run_tf_function=False` to ensure TensorFlow
    # uses hvd.DistributedOptimizer() to compute gradients.
    mnist_model.compile(
        loss=tf.losses.SparseCategoricalCrossentropy(),
        optimizer=opt,
        metrics=['accuracy'],
        experimental_run_tf_function=False)

    callbacks = [
        # Horovod: broadcast initial variable states from rank 0 to all other processes.
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),

        # Horovod: average metrics among workers at the end of every epoch.
        hvd.callbacks.MetricAverageCallback(),

        # Horovod: scale the learning rate up to `lr * hvd.size()` during the first epoch.
        hvd.callbacks.LearningRateWarmupCallback(
            initial_lr=scaled_lr, warmup_epochs=1, verbose=1),
    ]

    # Horovod: save checkpoints only on worker 0 to prevent other workers from corrupting them.
    if hvd.rank() == 0:
        callbacks.append(
            tf.keras.callbacks.ModelCheckpoint(os.path.join(checkpoint_dir, 'checkpoint-{epoch}.h5')))

    # Horovod: write logs on worker 0.
    verbose = 1 if hvd.rank() == 0 else 0

    # Train the model.
    # Horovod: adjust number of steps based on number of GPUs.
    history = mnist_model.fit(
        dataset,
        steps_per_epoch=60 // hvd.size(),
        callbacks=callbacks,
        epochs=num_epochs,
        verbose=verbose)

    checksum = float(sum(np.abs(w).sum() for w in mnist_model.get_weights()))
    return dict(rank=hvd.rank(), size=hvd.size(), local_rank=hvd.local_rank(), local_size=hvd.local_size(),
                loss0=history.history['loss'][0], loss=history.history['loss'][-1], checksum=checksum)


if __name__ == '__main__':
    args = parser.parse_args()
    ray.init(address=args.address)
    settings = RayExecutor.create_settings(timeout_s=30)
    if args.num_hosts:
        executor = RayExecutor(
            settings, num_hosts=args.num_hosts, num_workers_per_host=args.num_workers_per_host,
            use_gpu=False, cpus_per_worker=1)
    else:
        executor = RayExecutor(settings, num_workers=args.num_workers, use_gpu=False)
    executor.start()
    results = executor.run(train, kwargs=dict(num_epochs=args.epochs, checkpoint_dir=args.checkpoint_dir))
    executor.shutdown()
    for result in results:
        print("RESULT " + " ".join("%s=%s" % item for item in sorted(result.items())))
