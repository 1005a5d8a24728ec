"""The Keras digits example on Ray Train, with tfring averaging the gradients.

    python examples/ray_keras.py --num-workers 2

Starts a local Ray (or joins one with --address), then runs ``train_fn`` on every Ray
Train worker through ``tfring.ray.TfringTrainer``: each worker is a rank of one tfring job
(initialized before ``train_fn`` starts), so the function is the same code a tfringrun
script runs. Rank 0 reports the test accuracy and the model to Ray; the driver prints
them.
"""

import argparse
import math
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def train_fn(config):
    import keras
    import numpy as np
    import ray.train
    import tensorflow as tf
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    import tfring.keras as hvd

    tf.config.threading.set_intra_op_parallelism_threads(config["threads"])
    tf.config.threading.set_inter_op_parallelism_threads(config["threads"])
    digits = load_digits()
    images = (digits.images / 16.0).astype("float32")[..., np.newaxis]
    x_train, x_test, y_train, y_test = train_test_split(images, digits.target, test_size=0.2, random_state=0,
                                                        stratify=digits.target)
    usable = len(x_train) - len(x_train) % hvd.size()  # equal shards: every rank runs the same steps
    x_train, y_train = x_train[:usable][hvd.rank()::hvd.size()], y_train[:usable][hvd.rank()::hvd.size()]

    keras.utils.set_random_seed(0)  # rank 0's initial weights are broadcast to every rank
    model = keras.Sequential([
        keras.Input((8, 8, 1)),
        keras.layers.Conv2D(32, (3, 3), activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ])
    scaled_lr = 1.0 * hvd.size()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adadelta(scaled_lr)),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    callbacks = [
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.MetricAverageCallback(),
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=scaled_lr, warmup_epochs=1),
    ]
    epochs = math.ceil(config["base_epochs"] / hvd.size())
    model.fit(x_train, y_train, batch_size=32, epochs=epochs, callbacks=callbacks, verbose=hvd.verbose(2))
    loss, accuracy = model.evaluate(x_test, y_test, verbose=0)
    metrics = {"test_loss": loss, "test_accuracy": accuracy, "ranks": hvd.size(), "epochs": epochs}
    # Ray Train keeps the metrics reported with a checkpoint: rank 0 saves the model (every
    # rank holds the same one) and reports both; the other ranks report the metrics only.
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = None
        if hvd.rank() == 0:
            model.save(os.path.join(folder, "model.keras"))
            checkpoint = ray.train.Checkpoint.from_directory(folder)
        ray.train.report(metrics, checkpoint=checkpoint)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-workers", type=int, default=2, help="Ray Train workers = tfring ranks (default 2)")
    parser.add_argument("--base-epochs", type=int, default=12,
                        help="epochs for one process; each of N ranks runs ceil(base / N) (default 12)")
    parser.add_argument("--address", default=None, help="an existing Ray cluster (default: start a local one)")
    parser.add_argument("--storage-path", default=os.path.abspath(os.path.join("runs", "ray_keras")),
                        help="Ray Train's run directory (default runs/ray_keras)")
    args = parser.parse_args()

    import ray
    from ray.train import RunConfig, ScalingConfig

    from tfring.ray import TfringTrainer

    cpus = os.cpu_count() or 1
    if args.address:
        ray.init(address=args.address)
    else:
        ray.init(num_cpus=max(cpus, args.num_workers), include_dashboard=False)
    trainer = TfringTrainer(
        train_fn,
        train_loop_config={"base_epochs": args.base_epochs, "threads": max(1, cpus // args.num_workers)},
        scaling_config=ScalingConfig(num_workers=args.num_workers),
        run_config=RunConfig(storage_path=args.storage_path, name="digits"),
    )
    result = trainer.fit()
    m = result.metrics
    print(f"Ranks: {m['ranks']}, epochs: {m['epochs']}, test loss: {m['test_loss']:.4f}, "
          f"test accuracy: {m['test_accuracy']:.4f}")
    print(f"Model: {os.path.join(result.checkpoint.path, 'model.keras')}")


if __name__ == "__main__":
    main()
