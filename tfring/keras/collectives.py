"""Horovod's ``horovod.keras`` value-level collectives: take a value (NumPy array, Python
number or tensor) and, when run eagerly, return a NumPy array; inside a ``tf.function``
they return tensors. Names follow ``tfring.tensorflow``: equal on every rank for the same
collective.
"""

import tensorflow as tf

import tfring.tensorflow as hvd_tf


def _value(result):
    if tf.executing_eagerly() and hasattr(result, "numpy"):
        return result.numpy()
    return result


def allreduce(value, name=None, average=None, prescale_factor=1.0, postscale_factor=1.0, op=None,
              compression=hvd_tf.Compression.none, process_set=hvd_tf.global_process_set):
    """Reduces ``value`` over ranks (``op`` default Average; ``average=False`` means Sum).
    Every function here takes ``process_set`` (docs/tensorflow.md "Process sets")."""
    return _value(
        hvd_tf.allreduce(
            tf.convert_to_tensor(value),
            average=average,
            compression=compression,
            op=op,
            prescale_factor=prescale_factor,
            postscale_factor=postscale_factor,
            name=name,
            process_set=process_set,
        )
    )


def allgather(value, name=None, process_set=hvd_tf.global_process_set):
    """Concatenates every rank's ``value`` along the first dimension, in rank order."""
    return _value(hvd_tf.allgather(tf.convert_to_tensor(value), name=name, process_set=process_set))


def broadcast(value, root_rank, name=None, process_set=hvd_tf.global_process_set):
    """``root_rank``'s ``value`` on every rank."""
    return _value(hvd_tf.broadcast(tf.convert_to_tensor(value), root_rank, name=name, process_set=process_set))


def reducescatter(value, name=None, op=hvd_tf.Average, process_set=hvd_tf.global_process_set):
    """Reduces ``value`` over ranks (``op`` Average or Sum) and returns this rank's share of
    the first dimension (the first ``dim0 % size`` ranks get one row more)."""
    return _value(hvd_tf.reducescatter(tf.convert_to_tensor(value), name=name, op=op, process_set=process_set))
