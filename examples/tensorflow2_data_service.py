"""Horovod's tf.data service example (``tensorflow2_mnist_data_service.py`` and its two
train functions) for tfring, on scikit-learn's digits, offline.

    # 1. the compute job: tf.data workers (and dispatcher) on 2 ranks
    tfringrun -np 2 python -m tfring.tensorflow.data.compute_worker /tmp/compute.json &
    # 2. the training job, started from Python with tfring.run; stops the compute job at the end
    python examples/tensorflow2_data_service.py --compute-service-config-file /tmp/compute.json \\
        --training-tasks 2

The input pipeline (shuffle, batch) runs in the compute job. Each training rank reads its
own tf.data job (a whole shuffled stream, as in Horovod); with ``--reuse-dataset`` the ranks
share one job and each gets its share of the batches (``--round-robin``: in turn).
DistributedOptimizer averages the gradients, so every rank ends with the same weights. The compute job's
``--dispatcher-side training`` picks the other train function (the dispatcher runs in
training rank 0). Prints each rank's weight checksum and whether they are identical.
"""

import argparse
import sys

import tfring
from tfring.tensorflow.data.compute_service import TfDataServiceConfig, tf_data_service


def _pipeline():
    import numpy as np
    import tensorflow as tf
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    return tf.data.Dataset.from_tensor_slices((x.astype(np.float32) / 16.0, y.astype(np.int64)))


def _fit(dataset, steps, epochs):
    import keras
    import numpy as np

    import tfring.keras as hvd

    keras.utils.set_random_seed(hvd.rank())  # different starts: the broadcast aligns them
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu"),
                              keras.layers.Dense(10, activation="softmax")])
    opt = hvd.DistributedOptimizer(keras.optimizers.Adam(0.001 * hvd.size()))
    model.compile(loss="sparse_categorical_crossentropy", optimizer=opt, metrics=["accuracy"])
    model.fit(dataset, steps_per_epoch=steps, epochs=epochs, verbose=2 if hvd.rank() == 0 else 0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
    return float(sum(np.abs(w).sum() for w in model.get_weights()))


def _init():
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import tfring.keras as hvd

    hvd.init()
    return hvd


def train_fn_compute_side(compute_config, reuse_dataset=False, round_robin=False, steps=8, epochs=2):
    """The dispatcher runs in the compute job: send the pipeline there."""
    hvd = _init()
    dataset = _pipeline().repeat().shuffle(2000).batch(32) \
        .send_to_data_service(compute_config, hvd.rank(), hvd.size(), reuse_dataset=reuse_dataset,
                              round_robin=round_robin) \
        .prefetch(2)
    return _fit(dataset, steps, epochs)


def train_fn_training_side(compute_config, reuse_dataset=False, round_robin=False, steps=8, epochs=2):
    """The dispatcher runs in training rank 0 (one dispatcher) or in every rank."""
    import tensorflow as tf

    hvd = _init()
    with tf_data_service(compute_config, hvd.rank()) as dispatcher_address:
        dataset = _pipeline().repeat().shuffle(2000).batch(32).apply(
            tf.data.experimental.service.distribute(
                service=dispatcher_address, processing_mode="distributed_epoch",
                job_name="job" if reuse_dataset else None,
                consumer_index=hvd.rank() if round_robin else None,
                num_consumers=hvd.size() if round_robin else None)).prefetch(2)
        checksum = _fit(dataset, steps, epochs)
        hvd.barrier()  # rank 0's dispatcher must outlive every rank's reads
        return checksum


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--compute-service-config-file", required=True, dest="config_file")
    p.add_argument("--training-tasks", type=int, help="training ranks (one dispatcher); default: the dispatchers")
    p.add_argument("--reuse-dataset", action="store_true")
    p.add_argument("--round-robin", action="store_true")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--epochs", type=int, default=2)
    args = p.parse_args(argv)
    config = TfDataServiceConfig.read(args.config_file, wait_for_file_creation=True, timeout=120)
    if config.dispatchers > 1 and args.training_tasks not in (None, config.dispatchers):
        sys.exit(f"--training-tasks {args.training_tasks} must equal the compute job's {config.dispatchers} "
                 "dispatchers")
    if config.dispatchers == 1 and args.training_tasks is None:
        sys.exit("give --training-tasks: the compute service has one dispatcher for every rank")
    train_fn = train_fn_training_side if config.dispatcher_side == "training" else train_fn_compute_side
    try:
        checksums = tfring.run(train_fn, args=(config,),
                               kwargs={"reuse_dataset": args.reuse_dataset, "round_robin": args.round_robin,
                                       "steps": args.steps, "epochs": args.epochs},
                               np=args.training_tasks or config.dispatchers)
    finally:
        config.compute_client().shutdown()
    print("weight checksums by rank:", checksums)
    print("identical weights:", len(set(checksums)) == 1)


if __name__ == "__main__":
    main()
