"""Horovod's grouped allgather and reducescatter: one call for a list of tensors.

Each member is its own tfring op (negotiated as ``<name>.<i>``), so members may have any
dtypes and shapes and each gets its op's gradient; inside a ``tf.function`` they run
concurrently. Horovod sends them as one op; the results and gradients are the same.
"""

import tensorflow as tf

from tfring._basics.process_sets import global_process_set
from tfring._tensorflow import mpi_ops, naming
from tfring._tensorflow.compression import Compression


def _member_names(name, count):
    naming.check_name(name)
    return [None if name is None else f"{name}.{i}" for i in range(count)]


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """``allgather`` of every tensor of ``tensors``; returns the list of results in order.

    Raises:
      ValueError: a member is None.
    """
    tensors = list(tensors)
    if any(t is None for t in tensors):
        raise ValueError("grouped_allgather got None in its list of tensors; drop the Nones first")
    return [mpi_ops.allgather(tf.convert_to_tensor(t), name=n, process_set=process_set)
            for t, n in zip(tensors, _member_names(name, len(tensors)))]


def grouped_reducescatter(tensors, device_dense="", compression=Compression.none, op=mpi_ops.Average,
                          prescale_factor=1.0, postscale_factor=1.0, name=None, process_set=global_process_set):
    """``reducescatter`` of every tensor of ``tensors`` (same arguments); returns the list of
    this rank's blocks in order.

    Raises:
      ValueError: a member is None.
    """
    tensors = list(tensors)
    if any(t is None for t in tensors):
        raise ValueError("grouped_reducescatter got None in its list of tensors; drop the Nones first")
    return [mpi_ops.reducescatter(t, device_dense=device_dense, compression=compression, op=op, name=n,
                                  prescale_factor=prescale_factor, postscale_factor=postscale_factor,
                                  process_set=process_set)
            for t, n in zip(tensors, _member_names(name, len(tensors)))]
