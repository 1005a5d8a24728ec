"""Horovod's ``horovod.tensorflow.keras`` value-level collectives (``allreduce``,
``allgather``, ``broadcast``, ``reducescatter``, ``broadcast_global_variables``).

Each takes a tensor-compatible value (NumPy array, Python number or list, tensor), turns it
into a tensor with the dtype Horovod's ``tf.constant(value)`` gives (a Python float is
float32, a Python int int32, a NumPy array keeps its dtype; a tensor is taken as it is,
also inside a ``tf.function``, where ``tf.constant`` would refuse it) and returns what
Horovod returns:

* eagerly: a ``tf.Tensor`` (an EagerTensor, so ``.numpy()`` and ``tf.test.TestCase.evaluate``
  work), of the input's dtype, shaped as the ``tfring.tensorflow`` collective shapes it;
* inside a ``tf.function``: the symbolic tensor;
* in a ``tf.compat.v1`` graph (eager execution disabled), where Horovod runs the op in
  Keras' session: the op run in the default session (or, with none, a session of its
  own), so the result is NumPy.

Unlike Horovod, where ``name`` only names the constant it creates, ``name`` here is the
collective's negotiation name (``tfring.tensorflow``'s rules: equal on every rank for the same
collective; None picks one), and each function also takes ``process_set``.
"""

import tensorflow as tf

from tfring._basics.ops import Average
from tfring._basics.process_sets import global_process_set
from tfring._tensorflow import (
    gradients,  # noqa: F401 - registers the ops' gradients
    mpi_ops,
    tf1,
)
from tfring._tensorflow.compression import Compression
from tfring._tensorflow.mpi_ops import handle_average_backwards_compatibility


def _evaluate(result, what):
    """``result`` as Horovod's Keras module returns it (see the module docstring)."""
    if tf.executing_eagerly() or tf.inside_function():
        return result
    session = tf.compat.v1.get_default_session()
    if session is not None and session.graph is tf.compat.v1.get_default_graph():
        return session.run(result)
    if what == "broadcast_global_variables":
        raise RuntimeError(
            "tfring.keras.broadcast_global_variables() in a tf.compat.v1 graph runs in the default session, and "
            "there is none: call it inside `with session.as_default():` (Keras 3 has no global session), or run "
            "tfring.tensorflow.broadcast_global_variables(root_rank) in your own session")
    with tf.compat.v1.Session() as own:
        return own.run(result)


def allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0, op=None,
              compression=Compression.none, process_set=global_process_set):
    """Reduces ``value`` over ranks (``op`` default Average; the deprecated ``average=False``
    means Sum, ``True`` Average; giving both is a ``ValueError``). Every function here
    takes ``process_set`` (docs/tensorflow.md "Process sets")."""
    op = handle_average_backwards_compatibility(op, average)  # its warning names the caller's line
    return _evaluate(
        mpi_ops.allreduce(
            tf.convert_to_tensor(value),
            compression=compression,
            op=op,
            prescale_factor=prescale_factor,
            postscale_factor=postscale_factor,
            name=name,
            process_set=process_set,
        ),
        "allreduce",
    )


def allgather(value, name=None, process_set=global_process_set):
    """Concatenates every rank's ``value`` along the first dimension, in rank order (the
    first dimension may differ between ranks, the others may not)."""
    return _evaluate(mpi_ops.allgather(tf.convert_to_tensor(value), name=name, process_set=process_set), "allgather")


def broadcast(value, root_rank, name=None, process_set=global_process_set):
    """``root_rank``'s ``value`` on every rank (``root_rank`` is a global rank)."""
    return _evaluate(mpi_ops.broadcast(tf.convert_to_tensor(value), root_rank, name=name, process_set=process_set),
                     "broadcast")


def reducescatter(value, name=None, op=Average, process_set=global_process_set):
    """Reduces ``value`` over ranks (``op`` Average or Sum) and returns this rank's share of
    the first dimension (the first ``dim0 % size`` ranks get one row more)."""
    return _evaluate(mpi_ops.reducescatter(tf.convert_to_tensor(value), name=name, op=op, process_set=process_set),
                     "reducescatter")


def broadcast_global_variables(root_rank):
    """Assigns ``root_rank``'s values to every global variable (``tf.compat.v1`` graph mode
    only, run in the default session, as Horovod). Eagerly it raises ``RuntimeError``, as
    Horovod's does: use ``broadcast_variables(model.variables, root_rank)`` or the
    ``callbacks.BroadcastGlobalVariablesCallback``."""
    return _evaluate(tf1.broadcast_global_variables(root_rank), "broadcast_global_variables")
