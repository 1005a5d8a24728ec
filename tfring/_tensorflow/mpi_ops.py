"""The collectives of ``tfring.tensorflow`` (Horovod's ``horovod.tensorflow.mpi_ops``).

Every function works eagerly and inside ``tf.function`` / ``tf.compat.v1`` graphs, on CPU
tensors of dtype uint8, int8, int16, uint16, int32, int64, float16, bfloat16, float32, float64 or bool.
The kernels are asynchronous: they never block a TF thread. Names: see ``naming``.
Errors raise ``tf.errors`` classes (``errors``). Gradients are registered (``gradients``).
"""

import warnings

import numpy as np
import tensorflow as tf

from tfring import _core
from tfring._basics import basics
from tfring._basics import ops as _np_ops
from tfring._basics import process_sets as _np_process_sets
from tfring._basics.process_sets import global_process_set
from tfring._basics.process_sets import resolve as _set_id
from tfring._tensorflow import naming
from tfring._tensorflow._loader import op_library
from tfring._tensorflow.compression import Compression

# Reduce ops: the same values as tfring._basics.ops (the core's ReduceOp).
Sum = _np_ops.Sum
Average = _np_ops.Average
Min = _np_ops.Min
Max = _np_ops.Max
Product = _np_ops.Product
Adasum = _np_ops.Adasum  # Horovod's adaptive summation: docs/tensorflow.md "Adasum"
_OP_NAMES = {value: name for name, value in _core.reduce_ops().items()}  # the core's table

_lib = op_library()


def _check_op(op):
    if isinstance(op, bool) or op not in _OP_NAMES:
        raise ValueError(f"op must be one of hvd.Sum, Average, Min, Max, Product, Adasum. Received: {op!r}")
    return int(op)


def handle_average_backwards_compatibility(op, average):
    """Horovod's rule: ``average`` is a deprecated alias (True -> Average, False -> Sum);
    giving both is an error; neither means Average."""
    if op is not None and average is not None:
        raise ValueError("The op parameter supersedes average; pass only one of them. "
                         f"Received: op={op!r}, average={average!r}")
    if average is not None:
        if not isinstance(average, (bool, np.bool_)):
            raise TypeError(
                f"average must be a bool (the deprecated alias of op: True means Average, False Sum). "
                f"Received: average={average!r}. A reduce op given as the second positional argument "
                f"lands here: pass it by keyword, e.g. hvd.allreduce(x, op=hvd.Max)")
        warnings.warn("Parameter `average` has been replaced with `op` and will be removed; "
                      "use op=hvd.Average or op=hvd.Sum", DeprecationWarning, stacklevel=3)
        return Average if average else Sum
    return Average if op is None else _check_op(op)


def _scale(value):
    return float(value)


# ---- raw ops: one TF op each, no compression / sparse handling ----

# `process_set_id`: the core id (process_sets.resolve); 0 is every rank.

def _allreduce(tensor, op=Sum, prescale_factor=1.0, postscale_factor=1.0, name=None, process_set_id=0):
    tensor = tf.convert_to_tensor(tensor)
    op_name, key = naming.resolve("allreduce", "TfringAllreduce", name, process_set_id)
    return _lib.tfring_allreduce(tensor, tensor_name=key, reduce_op=_check_op(op),
                                 prescale_factor=_scale(prescale_factor),
                                 postscale_factor=_scale(postscale_factor), process_set_id=process_set_id,
                                 name=op_name)


def _grouped_allreduce(tensors, op=Sum, prescale_factor=1.0, postscale_factor=1.0, name=None, process_set_id=0):
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    op_name, key = naming.resolve("grouped_allreduce", "TfringGroupedAllreduce", name, process_set_id)
    return _lib.tfring_grouped_allreduce(tensors, tensor_names=[f"{key}.{i}" for i in range(len(tensors))],
                                         reduce_op=_check_op(op), prescale_factor=_scale(prescale_factor),
                                         postscale_factor=_scale(postscale_factor),
                                         process_set_id=process_set_id, name=op_name)


def _alltoall(tensor, splits=None, name=None, process_set_id=0):
    tensor = tf.convert_to_tensor(tensor)
    splits = tf.zeros([0], tf.int32) if splits is None else tf.cast(tf.convert_to_tensor(splits), tf.int32)
    op_name, key = naming.resolve("alltoall", "TfringAlltoall", name, process_set_id)
    return _lib.tfring_alltoall(tensor, splits, tensor_name=key, process_set_id=process_set_id, name=op_name)


def _allgather(tensor, name=None, process_set_id=0):
    tensor = tf.convert_to_tensor(tensor)
    op_name, key = naming.resolve("allgather", "TfringAllgather", name, process_set_id)
    return _lib.tfring_allgather(tensor, tensor_name=key, process_set_id=process_set_id, name=op_name)


def set_size(process_set_id):
    """The number of ranks of a set (the job's for 0), known at trace time."""
    return basics.size() if process_set_id == 0 else len(_np_process_sets.process_set_by_id(process_set_id).ranks)


def set_rank(process_set_id):
    """This rank's index in a set it is a member of (its rank for 0)."""
    if process_set_id == 0:
        return basics.rank()
    return _np_process_sets.process_set_by_id(process_set_id).ranks.index(basics.rank())


# ---- public API ----

def _allreduce_indexed_slices(slices, op, prescale_factor, postscale_factor, name, device_sparse, process_set_id=0):
    """An IndexedSlices "allreduce": every rank's values and indices gathered (the sum of
    the dense tensors they stand for), values divided by the size for Average."""
    if op == Adasum:  # Horovod's refusal and workaround
        raise NotImplementedError(
            "op=hvd.Adasum does not support tf.IndexedSlices (sparse gradients); pass "
            "sparse_as_dense=True to DistributedOptimizer / DistributedGradientTape, or densify them "
            "with tf.convert_to_tensor first")
    if op not in (Sum, Average):
        raise NotImplementedError(
            "Only Sum and Average are supported for tf.IndexedSlices (they are allgathered); "
            f"received op={_OP_NAMES.get(op, op)}. Densify them with tf.convert_to_tensor first.")
    with tf.device(device_sparse):
        values = _allgather(slices.values, None if name is None else f"{name}.values", process_set_id)
        indices = _allgather(slices.indices, None if name is None else f"{name}.indices", process_set_id)
        scale = float(prescale_factor) * float(postscale_factor)
        if scale != 1.0:
            if values.dtype.is_floating or values.dtype.is_complex:
                values = values * tf.cast(scale, values.dtype)
            else:
                values = tf.cast(tf.cast(values, tf.float64) * scale, values.dtype)
        if op == Average:
            # Horovod's numbers: a true division, so integer values become floats (int8/16 and
            # uint8/16 -> float32, int32/64 -> float64, as tf.math.truediv), never truncated.
            values = tf.math.truediv(values, tf.cast(set_size(process_set_id), values.dtype))
    return tf.IndexedSlices(values, indices, dense_shape=slices.dense_shape)


def allreduce(tensor, average=None, device_dense="", device_sparse="", compression=Compression.none,
              op=None, prescale_factor=1.0, postscale_factor=1.0, name=None, process_set=global_process_set):
    """Reduces ``tensor`` over every rank; every rank gets the result.

    Args:
      tensor: a tensor (same shape and dtype on every rank) or a ``tf.IndexedSlices``
        (values and indices are allgathered; only Sum and Average; Average divides the
        values, so integer values come back as floats, as in Horovod).
      average: deprecated alias of ``op`` (True: Average, False: Sum); anything but a bool
        is refused (``hvd.allreduce(x, hvd.Max)`` would otherwise average).
      device_dense, device_sparse: devices to place the dense / sparse reduction on.
      compression: ``Compression.none`` or ``Compression.fp16`` (what travels).
      op: ``Average`` (default), ``Sum``, ``Min``, ``Max``, ``Product`` or ``Adasum``. Integer
        averages truncate toward zero. ``Adasum`` (Horovod's adaptive summation, see
        docs/tensorflow.md) takes float CPU tensors and a power-of-two number of ranks, and
        divides by nothing.
      prescale_factor, postscale_factor: multiply the input before / the result after the
        reduction.
      name: negotiation name (see ``naming``); generated when None.
      process_set: a registered ``ProcessSet`` (docs/tensorflow.md "Process sets"): only its
        members call this, and Average divides by its size. Every collective here takes it.

    Returns:
      A tensor like ``tensor`` (``tf.IndexedSlices`` for ``tf.IndexedSlices``).

    Raises:
      tf.errors.FailedPreconditionError: ranks disagree on shape/dtype/op, or not initialized.
      tf.errors.InvalidArgumentError: a collective of this name is already in flight, or this
        rank is not a member of ``process_set``.
      tf.errors.UnimplementedError: ``Adasum`` on an integer or GPU tensor, or with a world size
        that is not a power of two.
      NotImplementedError: ``Adasum`` (or Min/Max/Product) on a ``tf.IndexedSlices``.
      ValueError: ``process_set`` is not registered (or was removed).
    """
    op = handle_average_backwards_compatibility(op, average)
    ps = _set_id(process_set)
    if isinstance(tensor, tf.IndexedSlices):
        return _allreduce_indexed_slices(tensor, op, prescale_factor, postscale_factor, name, device_sparse, ps)
    with tf.device(device_dense):
        compressed, ctx = compression.compress(tf.convert_to_tensor(tensor))
        reduced = _allreduce(compressed, op, prescale_factor, postscale_factor, name, ps)
        return compression.decompress(reduced, ctx)


def grouped_allreduce(tensors, average=None, device_dense="", device_sparse="", compression=Compression.none,
                      op=None, prescale_factor=1.0, postscale_factor=1.0, name=None,
                      process_set=global_process_set):
    """Allreduce of a list of tensors as one group: one op, one negotiation, fused in the
    core. Arguments as ``allreduce``; ``tf.IndexedSlices`` members are gathered one by one.
    Returns a list in the order of ``tensors``."""
    op = handle_average_backwards_compatibility(op, average)
    ps = _set_id(process_set)
    tensors = list(tensors)
    naming.check_name(name)
    if not tensors:
        return []
    if any(t is None for t in tensors):
        raise ValueError("grouped_allreduce got None in its list of tensors; drop the Nones first")
    results = [None] * len(tensors)
    dense_at = []
    for i, t in enumerate(tensors):
        if isinstance(t, tf.IndexedSlices):
            results[i] = _allreduce_indexed_slices(t, op, prescale_factor, postscale_factor,
                                                   None if name is None else f"{name}.sparse.{i}", device_sparse, ps)
        else:
            dense_at.append(i)
    if dense_at:
        with tf.device(device_dense):
            packed = [compression.compress(tf.convert_to_tensor(tensors[i])) for i in dense_at]
            reduced = _grouped_allreduce([c for c, _ in packed], op, prescale_factor, postscale_factor, name, ps)
            for i, r, (_, ctx) in zip(dense_at, reduced, packed):
                results[i] = compression.decompress(r, ctx)
    return results


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates every rank's ``tensor`` along the first dimension, in rank order. The
    first dimension may differ between ranks; the other dimensions and the dtype must not.
    With ``process_set``: the members' tensors, in the order of their global ranks."""
    return _allgather(tensor, name, _set_id(process_set))


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns ``root_rank``'s ``tensor`` on every rank (same shape and dtype everywhere).
    ``root_rank`` is a global rank, also with ``process_set`` (it must be a member then).

    Raises:
      tf.errors.InvalidArgumentError: ``root_rank`` is not a rank of the job (of the set).
    """
    if isinstance(root_rank, (bool, np.bool_)) or not isinstance(root_rank, (int, np.integer)):
        raise TypeError(f"root_rank must be a Python int. Received: {root_rank!r}")
    ps = _set_id(process_set)
    tensor = tf.convert_to_tensor(tensor)
    op_name, key = naming.resolve("broadcast", "TfringBroadcast", name, ps)
    return _lib.tfring_broadcast(tensor, tensor_name=key, root_rank=int(root_rank), process_set_id=ps,
                                 name=op_name)


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends ``splits[j]`` rows of ``tensor`` (in order) to rank j.

    Args:
      tensor: at least one dimension.
      splits: rows for each rank (list or int tensor of world size entries, summing to the
        first dimension); None divides the first dimension evenly.
      name: negotiation name.

    Returns:
      The rows from every rank concatenated in rank order; when ``splits`` was given, the
      pair ``(received, received_splits)`` with how many rows came from each rank (int32).
      As Horovod >= 0.24.
    """
    received, received_splits = _alltoall(tensor, splits, name, _set_id(process_set))
    return (received, received_splits) if splits is not None else received


def reducescatter(tensor, device_dense="", compression=Compression.none, op=Average, name=None,
                  prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces ``tensor`` over every rank and returns this rank's block of rows: the first
    dimension is split as evenly as possible, lower ranks getting one extra row. With
    ``process_set``, blocks go to the members by their index in the set."""
    ps = _set_id(process_set)
    with tf.device(device_dense):
        compressed, ctx = compression.compress(tf.convert_to_tensor(tensor))
        op_name, key = naming.resolve("reducescatter", "TfringReducescatter", name, ps)
        out = _lib.tfring_reducescatter(compressed, tensor_name=key, reduce_op=_check_op(op),
                                        prescale_factor=_scale(prescale_factor),
                                        postscale_factor=_scale(postscale_factor), process_set_id=ps,
                                        name=op_name)
        return compression.decompress(out, ctx)


def barrier(name=None):
    """Returns once every rank has reached this barrier (in a graph: returns the op)."""
    op_name, key = naming.resolve("barrier", "TfringBarrier", name)
    return _lib.tfring_barrier(tensor_name=key, name=op_name)


def join(name=None):
    """This rank has no more data (uneven shards): until every rank has joined, it adds zeros
    to the allreduces the other ranks still run, so they go on without it. Blocks (eagerly;
    in a graph: returns the op) until every rank has joined and returns the last rank to
    join, as an int32 scalar. Only allreduce and barrier can run while some rank has
    joined; anything else fails with ``FailedPreconditionError`` naming the joined ranks.
    ``Average`` still divides by ``size()``: a joined rank counts as zeros.
    """
    op_name, key = naming.resolve("join", "TfringJoin", name)
    return _lib.tfring_join(tensor_name=key, name=op_name)

