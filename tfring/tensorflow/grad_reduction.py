"""Allreduce of a list of gradients, shared by DistributedGradientTape and the TF1
DistributedOptimizer: dense gradients in grouped allreduces of about ``bucket_bytes`` each,
last layers first (``mpi_ops.bucketed_allreduce``: one negotiation per bucket, fused in the
core, overlapping the backward pass inside a function), ``tf.IndexedSlices`` gathered (or
densified with ``sparse_as_dense``), None left as None. With one rank the gradients are
returned as they are.
"""

import tensorflow as tf

from tfring import basics
from tfring.tensorflow import mpi_ops
from tfring.tensorflow.compression import Compression


def scale_factors(op, gradient_predivide_factor):
    """Horovod's split of Average into pre/post scales: (op, prescale, postscale)."""
    if gradient_predivide_factor != 1.0:
        if op != mpi_ops.Average:
            raise ValueError("gradient_predivide_factor is only supported with op=hvd.Average. "
                             f"Received: op={op!r}, gradient_predivide_factor={gradient_predivide_factor!r}")
        return op, 1.0 / gradient_predivide_factor, gradient_predivide_factor
    return op, 1.0, 1.0


def make_allreduce_grads_fn(scope_name, device_dense="", device_sparse="", compression=Compression.none,
                            sparse_as_dense=False, op=mpi_ops.Average, gradient_predivide_factor=1.0,
                            bucket_bytes=mpi_ops.DEFAULT_BUCKET_BYTES):
    op, prescale, postscale = scale_factors(mpi_ops._check_op(op), float(gradient_predivide_factor))

    def allreduce_grads(grads):
        grads = list(grads)
        if basics.is_initialized() and basics.size() == 1:
            return grads  # one rank: nothing to reduce, no cost (Horovod's rule too)
        with tf.name_scope(scope_name + "_Allreduce"):
            if sparse_as_dense:
                grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
            present = [i for i, g in enumerate(grads) if g is not None]
            reduced = mpi_ops.bucketed_allreduce([grads[i] for i in present], name=None, bucket_bytes=bucket_bytes,
                                                 device_dense=device_dense, device_sparse=device_sparse,
                                                 compression=compression, op=op, prescale_factor=prescale,
                                                 postscale_factor=postscale)
            out = list(grads)
            for i, r in zip(present, reduced):
                out[i] = r
            return out

    return allreduce_grads
