"""The gradient reduction: how a list of gradients is reduced across ranks. The one home of
the policy for ``DistributedGradientTape``, the TF1 ``DistributedOptimizer``, the Keras
``DistributedOptimizer`` and (its buckets) ``RingStrategy``'s gradient reduction.

``reduce_gradients`` applies, in order:

1. Who reduces: on a process set only its members (a rank outside keeps its own
   gradients); with one rank nothing (no cost), except in an elastic job.
2. Local variables (``local_sources``, Horovod's ``register_local_var``): their gradients
   stay on this rank, not reduced, divided by the size with ``scale_local_gradients``.
3. None stays None; ``tf.IndexedSlices`` are gathered (or densified with
   ``sparse_as_dense``).
4. Buckets (``gradient_buckets``): the rest go in grouped allreduces of about
   ``bucket_bytes`` each, last layers first (``bucketed_allreduce``: one negotiation per
   bucket, fused in the core, overlapping the backward pass inside a function), each one
   ``mpi_ops.grouped_allreduce`` with the caller's op, compression and scale factors
   (``scale_factors``: Horovod's pre/post scales of ``gradient_predivide_factor``) and
   the name ``<name>.b<k>`` (members ``<name>.b<k>.<i>``; automatic names without one).
"""

import tensorflow as tf

from tfring._basics import basics, process_sets
from tfring._bootstrap import launch_env
from tfring._tensorflow import mpi_ops
from tfring._tensorflow.compression import Compression

# Gradients are reduced in buckets of about this many bytes (see bucketed_allreduce).
DEFAULT_BUCKET_BYTES = 4 << 20


def gradient_buckets(tensors, bucket_bytes):
    """Splits the indices of ``tensors`` into buckets for ``bucketed_allreduce``: walking the
    list from its END (backprop produces the last layers' gradients first), a bucket is
    closed when the next tensor would take it past ``bucket_bytes``. Sizes come from static
    shapes (unknown ones and ``tf.IndexedSlices`` count 0), so every rank, tracing the same
    model, gets the same buckets. ``bucket_bytes`` <= 0: one bucket. Pure function."""
    order = list(range(len(tensors)))[::-1]
    if bucket_bytes is None or bucket_bytes <= 0:
        return [order] if order else []
    buckets, current, filled = [], [], 0
    for i in order:
        t = tensors[i]
        nbytes = 0
        if not isinstance(t, tf.IndexedSlices):
            shape = t.shape
            if shape.is_fully_defined():
                nbytes = shape.num_elements() * t.dtype.size
        if current and filled + nbytes > bucket_bytes:
            buckets.append(current)
            current, filled = [], 0
        current.append(i)
        filled += nbytes
    if current:
        buckets.append(current)
    return buckets


def bucketed_allreduce(tensors, name, bucket_bytes=DEFAULT_BUCKET_BYTES, **kwargs):
    """``grouped_allreduce`` of gradients in buckets (``gradient_buckets``): one op per
    bucket, named ``<name>.b<k>`` (``name`` None: automatic names, as ``grouped_allreduce``). Inside a
    ``tf.function`` each bucket's op starts as soon
    as its own gradients exist, so the reduction of the last layers overlaps the backward
    pass of the first ones; each bucket is still one negotiation, fused in the core.
    Eagerly the buckets simply run one after the other. ``kwargs`` as ``grouped_allreduce``.
    Returns a list in the order of ``tensors``."""
    tensors = list(tensors)
    results = [None] * len(tensors)
    for k, bucket in enumerate(gradient_buckets(tensors, bucket_bytes)):
        bucket_name = None if name is None else f"{name}.b{k}"
        reduced = mpi_ops.grouped_allreduce([tensors[i] for i in bucket], name=bucket_name, **kwargs)
        for i, r in zip(bucket, reduced):
            results[i] = r
    return results


def scale_factors(op, gradient_predivide_factor):
    """Horovod's split of Average into pre/post scales: (op, prescale, postscale)."""
    if gradient_predivide_factor != 1.0:
        if op != mpi_ops.Average:
            raise ValueError("gradient_predivide_factor is only supported with op=hvd.Average. "
                             f"Received: op={op!r}, gradient_predivide_factor={gradient_predivide_factor!r}")
        return op, 1.0 / gradient_predivide_factor, gradient_predivide_factor
    return op, 1.0, 1.0


def reduce_gradients(grads, *, variables=None, local_sources=None, scale_local_gradients=True, name=None,
                     sparse_as_dense=False, bucket_bytes=DEFAULT_BUCKET_BYTES, process_set=None,
                     **allreduce_kwargs):
    """Reduces the gradients ``grads`` across ranks (see the module's docstring) and returns
    the list in the same order (None stays None).

    Args:
      variables, local_sources: ``variables[i]`` is the variable of ``grads[i]``; the
        gradients of those in ``local_sources`` (a ``LocalSources``) are kept, divided by the
        size (the set's size on a process set, 1 outside it) with ``scale_local_gradients``.
      name: the negotiation-name prefix (None: the ops' scoped names in a graph, automatic
        names eagerly).
      sparse_as_dense, bucket_bytes: as ``DistributedOptimizer``.
      process_set: reduce over that set's members only (None: every rank).
      **allreduce_kwargs: as ``grouped_allreduce`` (op, compression, scale factors, devices).
    """
    grads = list(grads)
    shared_kwargs = dict(name=name, sparse_as_dense=sparse_as_dense, bucket_bytes=bucket_bytes,
                         process_set=process_set, **allreduce_kwargs)
    if not local_sources:
        return _reduce_shared(grads, **shared_kwargs)
    shared_at = local_sources.shared_indices(variables)
    out = list(grads)
    for i, g in zip(shared_at, _reduce_shared([grads[i] for i in shared_at], **shared_kwargs)):
        out[i] = g
    if scale_local_gradients:
        out = local_sources.divide_local(out, variables, process_set)
    return out


def _reduce_shared(grads, *, name, sparse_as_dense, bucket_bytes, process_set, **allreduce_kwargs):
    """Steps 1, 3 and 4 of the module's docstring, on every gradient of ``grads``."""
    ps = process_sets.resolve(process_set)
    if ps != 0:
        if not process_set.included() or mpi_ops.set_size(ps) == 1:
            # Outside the set, a rank keeps its own gradients (Horovod's rule); a set of one
            # has nothing to reduce.
            return grads
        allreduce_kwargs["process_set"] = process_set
    elif basics.is_initialized() and basics.size() == 1 and not launch_env.elastic_worker_id():
        # One rank: nothing to reduce, no cost (Horovod's rule too). Not in an elastic job,
        # where a function traced with one rank must still reduce once the job grows.
        return grads
    if sparse_as_dense:
        grads = [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in grads]
    present = [i for i, g in enumerate(grads) if g is not None]
    reduced = bucketed_allreduce([grads[i] for i in present], name=name, bucket_bytes=bucket_bytes,
                                 **allreduce_kwargs)
    out = list(grads)
    for i, r in zip(present, reduced):
        out[i] = r
    return out


def make_allreduce_grads_fn(scope_name, device_dense="", device_sparse="", compression=Compression.none,
                            sparse_as_dense=False, op=mpi_ops.Average, gradient_predivide_factor=1.0,
                            bucket_bytes=DEFAULT_BUCKET_BYTES, process_set=None):
    """``allreduce_grads(grads, **local)``: ``reduce_gradients`` with these settings, under
    the name scope ``<scope_name>_Allreduce``; ``local``: ``variables``, ``local_sources``,
    ``scale_local_gradients``."""
    op, prescale, postscale = scale_factors(mpi_ops._check_op(op), float(gradient_predivide_factor))

    def allreduce_grads(grads, **local):
        with tf.name_scope(scope_name + "_Allreduce"):
            return reduce_gradients(grads, sparse_as_dense=sparse_as_dense, bucket_bytes=bucket_bytes,
                                    device_dense=device_dense, device_sparse=device_sparse,
                                    compression=compression, op=op, prescale_factor=prescale,
                                    postscale_factor=postscale, process_set=process_set, **local)

    return allreduce_grads
