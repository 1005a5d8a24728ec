"""``DistributedGradientTape``: a ``tf.GradientTape`` whose ``gradient()`` allreduces.

Usage (Horovod's)::

    with tf.GradientTape() as tape:
        loss = ...
    tape = hvd.DistributedGradientTape(tape)
    grads = tape.gradient(loss, model.trainable_variables)   # averaged over ranks
"""

import tensorflow as tf

from tfring._tensorflow import mpi_ops
from tfring._tensorflow.compression import Compression
from tfring._tensorflow.grad_reduction import DEFAULT_BUCKET_BYTES, make_allreduce_grads_fn
from tfring._tensorflow.local_sources import LocalSources, layer_variables


class _DistributedGradientTapeMixin:
    def register_local_source(self, source):
        """Registers ``source`` (a variable) as local to this rank: ``gradient()`` returns
        its own gradient, unreduced (divided by the size with ``scale_local_gradients``)."""
        self._tfring_local_sources.add(source)

    def gradient(self, target, sources, output_gradients=None, unconnected_gradients=None):
        kwargs = {} if unconnected_gradients is None else {"unconnected_gradients": unconnected_gradients}
        grads = super().gradient(target, sources, output_gradients, **kwargs)
        flat = tf.nest.flatten(grads)
        reduced = self._tfring_allreduce_grads(flat, variables=tf.nest.flatten(sources),
                                               local_sources=self._tfring_local_sources,
                                               scale_local_gradients=self._tfring_scale_local_gradients)
        return tf.nest.pack_sequence_as(grads, reduced)


def DistributedGradientTape(tape, device_dense="", device_sparse="", compression=Compression.none,
                            sparse_as_dense=False, op=mpi_ops.Average, gradient_predivide_factor=1.0,
                            bucket_bytes=DEFAULT_BUCKET_BYTES, scale_local_gradients=True,
                            process_set=None):
    """Wraps ``tape`` (before or after its ``with`` block) so that ``gradient()`` returns
    gradients reduced over every rank (over ``process_set``'s members when given).

    Dense gradients go in grouped allreduces of about ``bucket_bytes`` each, last layers
    first (each negotiated and fused as one; inside a ``tf.function`` they start while the
    rest of the backward pass runs);
    ``tf.IndexedSlices`` are allgathered, or densified first with ``sparse_as_dense=True``.

    Args:
      tape: a ``tf.GradientTape``.
      device_dense, device_sparse: devices for dense / sparse reductions.
      compression: ``Compression.none`` or ``Compression.fp16``.
      sparse_as_dense: convert ``tf.IndexedSlices`` gradients to dense tensors.
      op: ``Average`` (default) or ``Sum`` (or Min/Max/Product for dense gradients), or
        ``Adasum`` (Horovod's adaptive summation of dense float CPU gradients, divided by
        nothing; power-of-two world sizes; docs/tensorflow.md "Adasum").
      gradient_predivide_factor: with Average, divide by this before the sum and by
        ``size / factor`` after it.
      bucket_bytes: bucket size (default 4 MiB; 0: one group for all gradients).
      scale_local_gradients: divide the gradients of sources registered with
        ``register_local_source`` by the size (Horovod's default).
      process_set: a registered ``ProcessSet``: gradients are averaged over its members; a
        rank outside it gets its own gradients back (docs/tensorflow.md "Process sets").

    Returns:
      A tape of a subclass of ``type(tape)`` sharing its recorded state.
    """
    if not isinstance(tape, tf.GradientTape):
        raise TypeError(f"DistributedGradientTape expects a tf.GradientTape. Received: {type(tape).__name__}")
    cls = type(type(tape).__name__, (_DistributedGradientTapeMixin, type(tape)), {})
    wrapped = cls.__new__(cls)
    wrapped.__dict__.update(tape.__dict__)
    wrapped._tfring_allreduce_grads = make_allreduce_grads_fn(
        "DistributedGradientTape", device_dense, device_sparse, compression, sparse_as_dense, op,
        gradient_predivide_factor, bucket_bytes, process_set)
    wrapped._tfring_local_sources = LocalSources()
    wrapped._tfring_scale_local_gradients = bool(scale_local_gradients)
    return wrapped


def PartialDistributedGradientTape(tape, device_dense="", device_sparse="", compression=Compression.none,
                                   sparse_as_dense=False, op=mpi_ops.Average, gradient_predivide_factor=1.0,
                                   local_layers=None, scale_local_gradients=True,
                                   bucket_bytes=DEFAULT_BUCKET_BYTES, process_set=None):
    """``DistributedGradientTape`` whose ``local_layers`` (a Keras layer or a list) keep
    their own rank's gradients: their trainable variables are registered as local sources.
    Raises ``ValueError`` when ``local_layers`` holds something that is not a layer."""
    wrapped = DistributedGradientTape(tape, device_dense, device_sparse, compression, sparse_as_dense, op,
                                      gradient_predivide_factor, bucket_bytes, scale_local_gradients,
                                      process_set)
    for variable in layer_variables(local_layers):
        wrapped.register_local_source(variable)
    return wrapped
