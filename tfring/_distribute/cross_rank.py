"""Cross-rank collectives of RingStrategy, on tfring's TensorFlow ops.

Every reduction the strategy performs goes through here: gradients and replica-context
``all_reduce`` (one grouped allreduce per call, or per ~4 MiB bucket for gradients, so the
core fuses them), ``strategy.reduce``,
``strategy.gather`` / ``all_gather`` (allgather along any axis; shapes may differ along it),
the broadcast that makes new variables equal, and metric synchronization.

Names (the core's negotiation keys) follow ``tfring.tensorflow``'s rule: inside a
``tf.function`` the op's scoped name in its graph (under a ``RingStrategy_<kind>`` name
scope) prefixed by the function's name, stable across retraces; eagerly
``RingStrategy.<kind>.<n>`` from a per-kind counter, equal on every rank as long as every
rank makes the same eager calls in the same order (the rule of collectives anyway).

Blocking: eager calls block until every rank has called; in a graph the ops are
asynchronous kernels that never block a TF thread.
"""

import contextlib

import tensorflow as tf

from tfring import _core
from tfring._basics import auto_names, basics
from tfring._basics.ops import Average, Sum
from tfring._tensorflow import (
    grad_reduction,
    gradients,  # noqa: F401 - registers the ops' gradients
    mpi_ops,
)

SUM = tf.distribute.ReduceOp.SUM
MEAN = tf.distribute.ReduceOp.MEAN



def _named(kind):
    """``(name, scope)``: the negotiation name to pass (None in a graph, where the op's own
    scoped name is the key) and a name scope for the op."""
    if tf.executing_eagerly():
        return auto_names.next_name(f"RingStrategy.{kind}"), contextlib.nullcontext()
    return None, tf.name_scope(f"RingStrategy_{kind}")


def _as_tensor(value):
    if isinstance(value, (tf.Tensor, tf.IndexedSlices)):
        return value
    if isinstance(value, tf.Variable):
        return value.read_value()
    return tf.convert_to_tensor(value)


def all_reduce(values, reduce_op, kind="all_reduce", bucket_bytes=0):
    """Reduces a list of tensors (or ``tf.IndexedSlices``) across ranks, SUM or MEAN.

    Dense tensors go in one grouped allreduce (one negotiation, fused by the core), or with
    ``bucket_bytes`` > 0 in ``tfring.tensorflow.bucketed_allreduce`` buckets (gradients: the
    last layers' bucket starts while the backward pass still runs);
    ``IndexedSlices`` are allgathered (values and indices), which is their sum; MEAN
    divides the gathered values by the world size. Returns a list in the input's order.
    """
    values = [_as_tensor(v) for v in values]
    if not values:
        return []
    if basics.is_initialized() and basics.size() == 1:
        return values  # one rank: its values are the sum and the mean, at no cost
    name, scope = _named(kind)
    with scope:
        op = Average if reduce_op == MEAN else Sum
        if bucket_bytes > 0:
            return grad_reduction.bucketed_allreduce(values, name=name, bucket_bytes=bucket_bytes, op=op)
        return mpi_ops.grouped_allreduce(values, op=op, name=name)


def all_gather(value, axis):
    """Concatenates every rank's ``value`` along ``axis`` in rank order (the sizes along
    ``axis`` may differ between ranks; the other dimensions must match)."""
    value = _as_tensor(value)
    if isinstance(value, tf.IndexedSlices):
        raise NotImplementedError("RingStrategy.gather does not support tf.IndexedSlices; "
                                  "convert it with tf.convert_to_tensor first.")
    axis = int(axis)
    rank = value.shape.rank
    if rank is None or rank == 0:
        raise ValueError(f"RingStrategy.gather needs a tensor of rank >= 1 with a known rank. "
                         f"Received: shape={value.shape}")
    if axis < 0:
        axis += rank
    name, scope = _named("gather")
    with scope:
        if axis == 0:
            return mpi_ops.allgather(value, name=name)
        perm = [axis] + [d for d in range(rank) if d != axis]
        inverse = [perm.index(d) for d in range(rank)]
        return tf.transpose(mpi_ops.allgather(tf.transpose(value, perm), name=name), inverse)


# dtypes the core moves as they are; other numeric ones travel as their bytes.
_NATIVE = frozenset(tf.as_dtype(name) for name in _core.data_types())


def can_broadcast(dtype):
    return dtype in _NATIVE or dtype.is_integer or dtype.is_floating or dtype.is_complex


def broadcast(value, root_rank=0, kind="broadcast"):
    """``root_rank``'s value on every rank (any numeric dtype; see ``can_broadcast``)."""
    value = _as_tensor(value)
    name, scope = _named(kind)
    with scope:
        if value.dtype in _NATIVE:
            return mpi_ops.broadcast(value, root_rank, name=name)
        raw = mpi_ops.broadcast(tf.bitcast(value, tf.uint8), root_rank, name=name)
        return tf.bitcast(raw, value.dtype)
