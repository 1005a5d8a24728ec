"""Allreduce of a list of gradients, the one home for DistributedGradientTape, the TF1
DistributedOptimizer and the Keras DistributedOptimizer: dense gradients in grouped allreduces of about ``bucket_bytes`` each,
last layers first (``mpi_ops.bucketed_allreduce``: one negotiation per bucket, fused in the
core, overlapping the backward pass inside a function), ``tf.IndexedSlices`` gathered (or
densified with ``sparse_as_dense``), None left as None. With one rank the gradients are
returned as they are.
"""

import tensorflow as tf

from tfring import basics, process_sets
from tfring.elastic import worker as elastic_worker
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


def reduce_gradients(grads, *, name=None, sparse_as_dense=False, bucket_bytes=mpi_ops.DEFAULT_BUCKET_BYTES,
                     process_set=None, **allreduce_kwargs):
    """Reduces every non-None gradient of ``grads`` across ranks and returns the list in the
    same order (None stays None). ``name``: the negotiation-name prefix (None: the ops'
    scoped names in a graph, automatic names eagerly); ``process_set``: reduce over that
    set's members only (None: every rank); ``allreduce_kwargs`` as ``grouped_allreduce``
    (op, compression, scale factors, devices)."""
    grads = list(grads)
    ps = process_sets.resolve(process_set)
    if ps != 0:
        if not process_set.included() or mpi_ops.set_size(ps) == 1:
            # Outside the set, a rank keeps its own gradients (Horovod's rule); a set of one
            # has nothing to reduce.
            return grads
        allreduce_kwargs["process_set"] = process_set
    elif basics.is_initialized() and basics.size() == 1 and not elastic_worker.worker_id():
        # One rank: nothing to reduce, no cost (Horovod's rule too). Not in an elastic job,
        # where a function traced with one rank must still reduce once the job grows.
        return grads
    if sparse_as_dense:
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
    present = [i for i, g in enumerate(grads) if g is not None]
    reduced = mpi_ops.bucketed_allreduce([grads[i] for i in present], name=name, bucket_bytes=bucket_bytes,
                                         **allreduce_kwargs)
    out = list(grads)
    for i, r in zip(present, reduced):
        out[i] = r
    return out


def make_allreduce_grads_fn(scope_name, device_dense="", device_sparse="", compression=Compression.none,
                            sparse_as_dense=False, op=mpi_ops.Average, gradient_predivide_factor=1.0,
                            bucket_bytes=mpi_ops.DEFAULT_BUCKET_BYTES, process_set=None):
    op, prescale, postscale = scale_factors(mpi_ops._check_op(op), float(gradient_predivide_factor))

    def allreduce_grads(grads):
        with tf.name_scope(scope_name + "_Allreduce"):
            return reduce_gradients(grads, sparse_as_dense=sparse_as_dense, bucket_bytes=bucket_bytes,
                                    device_dense=device_dense, device_sparse=device_sparse,
                                    compression=compression, op=op, prescale_factor=prescale,
                                    postscale_factor=postscale, process_set=process_set)

    return allreduce_grads
