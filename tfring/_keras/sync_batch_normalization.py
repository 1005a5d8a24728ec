"""``SyncBatchNormalization``: batch normalization whose batch statistics span every rank.

With data parallelism each rank sees ``global_batch / N`` samples; ordinary batch
normalization then normalizes with the statistics of that small local batch, which differs
from one process training on the global batch. This layer, in training, sums each rank's
per-channel ``sum(x)``, ``sum(x * x)`` and sample count over all ranks (one grouped
allreduce, negotiated once) and normalizes with the global mean and variance
(``E[x^2] - E[x]^2``, clamped at 0), as Horovod's ``SyncBatchNormalization`` does; the
moving statistics are updated from them, so every rank keeps the same ones. Gradients flow
through the allreduce (its gradient is the allreduce of the gradients). Inference, one
rank, and masked inputs (masked samples count as absent) follow Keras' layer.

A Keras layer like ``keras.layers.BatchNormalization`` (same arguments; ``synchronized`` is
accepted and ignored: this layer always synchronizes over tfring's ranks), saved and loaded
as ``tfring>SyncBatchNormalization``. Every rank must call it the same number of times per
step, as with any collective.
"""

import keras


@keras.saving.register_keras_serializable(package="tfring")
class SyncBatchNormalization(keras.layers.BatchNormalization):
    """Batch normalization with statistics over every rank's batch (see the module doc)."""

    def __init__(self, **kwargs):
        kwargs["synchronized"] = False  # Keras' tf.distribute path; tfring does its own
        super().__init__(**kwargs)

    def _moments(self, inputs, mask):
        from tfring._basics import basics

        if not basics.is_initialized() or basics.size() == 1:
            return super()._moments(inputs, mask)
        import tensorflow as tf

        from tfring._tensorflow import mpi_ops

        axes = list(self._reduction_axes)
        if mask is None:
            weights = tf.ones_like(inputs)
        else:
            weights = tf.broadcast_to(tf.cast(tf.expand_dims(mask, -1), inputs.dtype), tf.shape(inputs))
        local = [
            tf.reduce_sum(inputs * weights, axis=axes, keepdims=True),
            tf.reduce_sum(tf.square(inputs) * weights, axis=axes, keepdims=True),
            tf.reduce_sum(weights, axis=axes, keepdims=True),
        ]
        total_sum, total_square_sum, count = mpi_ops.grouped_allreduce(local, op=mpi_ops.Sum)
        mean = tf.math.divide_no_nan(total_sum, count)
        variance = tf.maximum(tf.math.divide_no_nan(total_square_sum, count) - tf.square(mean), 0.0)
        return tf.squeeze(mean, axes), tf.squeeze(variance, axes)
