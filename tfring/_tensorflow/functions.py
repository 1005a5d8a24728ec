"""Helpers built on the collectives: broadcasting variables and Python objects.

``broadcast_object`` / ``allgather_object`` run immediately in Python (pickled bytes through
tfring's NumPy collectives), in any mode; they are not graph ops. Their errors are
``tf.errors`` classes like the ops'.
"""

import io
import pickle

import numpy as np
import tensorflow as tf

from tfring._basics import basics
from tfring._basics import ops as _np_ops
from tfring._basics.process_sets import global_process_set
from tfring._basics.process_sets import process_set_by_id as _process_set_by_id
from tfring._basics.process_sets import resolve as _set_id
from tfring._tensorflow import mpi_ops, naming
from tfring._tensorflow.errors import as_tf_errors

try:
    import cloudpickle as _pickler
except ImportError:  # pragma: no cover - cloudpickle is optional
    _pickler = pickle


def _as_tf_variable(v):
    """tf.Variable behind a Keras 3 variable (TF backend); tf.Variables unchanged."""
    if isinstance(v, tf.Variable):
        return v
    inner = getattr(v, "value", None)
    if isinstance(inner, tf.Variable):
        return inner
    if hasattr(v, "assign"):
        return v
    raise TypeError(f"broadcast_variables expects variables. Received: {type(v).__name__}")


def _broadcast_assign(variables, root_rank, process_set=global_process_set):
    """One broadcast per dtype: the variables of a dtype are flattened into one buffer,
    broadcast, split and assigned back. Returns the group of assignments."""
    by_dtype, ragged = {}, []
    for v in variables:
        if v.shape.is_fully_defined():
            by_dtype.setdefault(v.dtype.base_dtype, []).append(v)
        else:
            ragged.append(v)
    assigns = []
    for group in by_dtype.values():
        flat = tf.concat([tf.reshape(tf.convert_to_tensor(v), [-1]) for v in group], axis=0)
        received = mpi_ops.broadcast(flat, root_rank, process_set=process_set)
        parts = tf.split(received, [v.shape.num_elements() for v in group])
        assigns += [v.assign(tf.reshape(p, v.shape)) for v, p in zip(group, parts)]
    assigns += [v.assign(mpi_ops.broadcast(tf.convert_to_tensor(v), root_rank, process_set=process_set))
                for v in ragged]
    return tf.group(*assigns)


def _broadcast_assign_eager(variables, root_rank, process_set_id):
    ps = global_process_set if process_set_id == 0 else _process_set_by_id(process_set_id)
    _broadcast_assign(variables, root_rank, ps)


# One traced function: the broadcasts of a call run concurrently, as in a graph. The set
# travels as its id (a Python int: one trace per set).
_broadcast_assign_fn = tf.function(_broadcast_assign_eager, autograph=False)


def broadcast_variables(variables, root_rank, process_set=global_process_set):
    """Assigns ``root_rank``'s values to ``variables`` on every rank (one broadcast per
    dtype). Eagerly it runs at once; in a graph it returns the op that does it.

    Args:
      variables: ``tf.Variable``s (or Keras 3 variables), in the same order on every rank.
      root_rank: the rank whose values win (a global rank, in ``process_set``).
      process_set: only its members call this and get the root's values.
    """
    ps_id = _set_id(process_set)
    variables = [_as_tf_variable(v) for v in variables]
    if not variables:
        return None if tf.executing_eagerly() else tf.no_op()
    if tf.executing_eagerly():
        _broadcast_assign_fn(variables, int(root_rank), ps_id)
        return None
    return _broadcast_assign(variables, int(root_rank), process_set)


def _to_bytes(obj):
    buf = io.BytesIO()
    _pickler.dump(obj, buf)
    return np.frombuffer(buf.getvalue(), dtype=np.uint8)


def _set_kind(kind, ps_id):
    return kind if ps_id == 0 else f"{kind}.ps{ps_id}"  # automatic names count per set


def broadcast_object(obj, root_rank=0, name=None, process_set=global_process_set):
    """Returns ``root_rank``'s ``obj`` on every rank (pickled with cloudpickle when it is
    installed, else pickle). Other ranks may pass anything (e.g. None). With
    ``process_set``: on its members, from ``root_rank`` (a global rank in the set).

    Raises:
      tf.errors.InvalidArgumentError: ``root_rank`` is not a rank of the job (of the set).
    """
    ps_id = _set_id(process_set)
    key = naming.eager_key(_set_kind("broadcast_object", ps_id), name)
    with as_tf_errors():
        is_root = basics.rank() == root_rank
        payload = _to_bytes(obj) if is_root else np.zeros([0], np.uint8)
        length = _np_ops.broadcast(np.array([payload.size], np.int64), root_rank, name=f"{key}.size",
                                   process_set=process_set)
        if not is_root:
            payload = np.zeros([int(length[0])], np.uint8)
        payload = _np_ops.broadcast(payload, root_rank, name=f"{key}.data", process_set=process_set)
    return obj if is_root else pickle.loads(payload.tobytes())


def allgather_object(obj, name=None, process_set=global_process_set):
    """Returns the list of every rank's ``obj``, in rank order (pickled like
    ``broadcast_object``); with ``process_set``, its members' objects."""
    ps_id = _set_id(process_set)
    key = naming.eager_key(_set_kind("allgather_object", ps_id), name)
    payload = _to_bytes(obj)
    with as_tf_errors():
        lengths = _np_ops.allgather(np.array([payload.size], np.int64), name=f"{key}.sizes",
                                    process_set=process_set)
        gathered = _np_ops.allgather(payload, name=f"{key}.data", process_set=process_set)
    out, offset = [], 0
    for n in lengths.tolist():
        out.append(pickle.loads(gathered[offset : offset + n].tobytes()))
        offset += n
    return out


def broadcast_(variables, root_rank, name=None, process_set=global_process_set):
    """Horovod's in-place broadcast: assigns ``root_rank``'s values to ``variables`` (as
    ``broadcast_variables``) and returns their new values, in order. Eagerly the values are
    tensors read after the assignment; in a graph or ``tf.function`` the returned reads
    depend on it.

    Args:
      variables: ``tf.Variable``s (or Keras 3 variables), in the same order on every rank.
      root_rank: the rank whose values win.
      name: accepted for Horovod compatibility; the broadcasts are named per dtype group.
    """
    naming.check_name(name)
    variables = [_as_tf_variable(v) for v in variables]
    assign = broadcast_variables(variables, root_rank, process_set=process_set)
    if assign is None:
        return [v.read_value() for v in variables]
    with tf.control_dependencies([assign]):
        return [v.read_value() for v in variables]


def broadcast_object_fn(root_rank=0, session=None, name=None, process_set=global_process_set):
    """Horovod's factory for repeated object broadcasts: returns ``fn(obj)`` that is
    ``broadcast_object(obj, root_rank, name)``. tfring's object broadcast runs in Python in
    any mode, so ``session`` (TF1) is accepted and not needed."""
    del session  # not needed: the broadcast does not run in a graph

    def fn(obj):
        return broadcast_object(obj, root_rank, name=name, process_set=process_set)

    return fn
