"""Horovod's ``rank_op``, ``local_rank_op``, ``size_op``, ``local_size_op``,
``cross_rank_op``, ``cross_size_op``: int32 scalars read when the graph RUNS, not when it
is built (a graph built before ``init()``, or exported and run in another job, sees the job
it runs in). Each is a ``tf.py_function`` over tfring's basics: it works eagerly, in
``tf.function`` and in TF1 sessions of this process; it does not serialize into a
SavedModel (use the Python values there)."""

import tensorflow as tf

from tfring import basics


def _op(query, name):
    def read():
        return tf.constant(query(), tf.int32)

    out = tf.py_function(read, [], tf.int32, name=name)
    out.set_shape([])
    return out


def rank_op(name=None):
    """This process's rank, read at run time."""
    return _op(basics.rank, name)


def local_rank_op(name=None):
    """This process's rank on its host, read at run time."""
    return _op(basics.local_rank, name)


def size_op(process_set_id=0, name=None):
    """The number of processes, read at run time (``process_set_id`` 0 only: the global set)."""
    _global_set_only(process_set_id)
    return _op(basics.size, name)


def local_size_op(name=None):
    """The number of processes on this host, read at run time."""
    return _op(basics.local_size, name)


def cross_rank_op(name=None):
    """The index of this host, read at run time."""
    return _op(basics.cross_rank, name)


def cross_size_op(name=None):
    """The number of hosts, read at run time."""
    return _op(basics.cross_size, name)


def _global_set_only(process_set_id):
    if process_set_id != 0:
        raise NotImplementedError(f"tfring has no process sets yet: only process_set_id=0 (the global set) "
                                  f"is supported. Received: {process_set_id!r}")
