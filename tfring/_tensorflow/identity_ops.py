"""Horovod's ``rank_op``, ``local_rank_op``, ``size_op``, ``local_size_op``,
``cross_rank_op``, ``cross_size_op``: int32 scalars read when the graph RUNS, not when it
is built (a graph built before ``init()``, or exported and run in another job, sees the job
it runs in). Each is a ``tf.py_function`` over tfring's basics: it works eagerly, in
``tf.function`` and in TF1 sessions of this process; it does not serialize into a
SavedModel (use the Python values there).

``size_op``, ``rank_op`` and ``process_set_included_op`` take ``process_set_id``: the set is
looked up when the op is built (an unknown id is a ``ValueError`` then), its size and this
rank's place in it are read when the op runs."""

import tensorflow as tf

from tfring._basics import basics
from tfring._basics import process_sets as _process_sets


def _op(query, name):
    def read():
        return tf.constant(query(), tf.int32)

    out = tf.py_function(read, [], tf.int32, name=name)
    out.set_shape([])
    return out


def rank_op(name=None, process_set_id=0):
    """This process's rank, read at run time; with ``process_set_id``, its index in that set
    (-1 outside it)."""
    if process_set_id == 0:
        return _op(basics.rank, name)
    ps = _process_sets.process_set_by_id(process_set_id)
    return _op(ps.rank, name)


def local_rank_op(name=None):
    """This process's rank on its host, read at run time."""
    return _op(basics.local_rank, name)


def size_op(process_set_id=0, name=None):
    """The number of processes (of the set ``process_set_id``), read at run time."""
    if process_set_id == 0:
        return _op(basics.size, name)
    ps = _process_sets.process_set_by_id(process_set_id)
    return _op(ps.size, name)


def process_set_included_op(process_set_id=0, name=None):
    """1 when this process is a member of set ``process_set_id``, else 0 (int32), read at run
    time."""
    ps = _process_sets.process_set_by_id(process_set_id)
    return _op(lambda: int(bool(ps.included())), name)


def local_size_op(name=None):
    """The number of processes on this host, read at run time."""
    return _op(basics.local_size, name)


def cross_rank_op(name=None):
    """The index of this host, read at run time."""
    return _op(basics.cross_rank, name)


def cross_size_op(name=None):
    """The number of hosts, read at run time."""
    return _op(basics.cross_size, name)

