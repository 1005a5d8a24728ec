"""A Keras fit with DistributedOptimizer on each rank's shard; ``train()`` returns the final
weights. Run by tests/test_spark.py both through tfring.spark.run (the function, sent by
value) and under tfringrun (``python tests/workers/spark_fit.py OUT.json``: rank 0 writes
the weights there), so the two can be compared."""

import json
import sys


def train(epochs=2):
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import keras

    import tfring.keras as hvd

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    keras.utils.set_random_seed(7 + rank)  # different starts: the broadcast must align them
    rng = np.random.RandomState(0)
    x = rng.rand(128, 5).astype("float32")
    y = (x @ rng.rand(5, 2)).astype("float32")
    x, y = x[rank::size], y[rank::size]
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)])
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(0.01)), loss="mse")
    model.fit(x, y, batch_size=16, epochs=epochs, shuffle=False, verbose=0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
    return [w.tolist() for w in model.get_weights()]


if __name__ == "__main__":
    weights = train()
    import tfring

    if tfring.rank() == 0:
        with open(sys.argv[1], "w") as f:
            json.dump(weights, f)
