"""Variables created under ``RingStrategy.scope()``.

Two rules keep every rank's variables equal, so any rank's copy is "the" model:

1. Created equal: each new variable takes rank 0's initial value (one broadcast at
   creation; eagerly after creating it, or inside a ``tf.function`` as part of its
   initializer; any numeric or bool dtype, string variables are left alone). Every rank
   must create the same variables in the same order.
2. Aggregated variables synchronized on write: a variable whose ``aggregation`` is SUM or
   MEAN (Keras metric state: ``synchronization=ON_READ``, ``aggregation=SUM``) assigned
   inside ``strategy.run`` (replica context) takes the update of every rank: for
   ``assign_add(d)`` / ``assign_sub(d)`` the deltas are all-reduced; for ``assign(v)`` the
   change ``v - old`` is (ON_READ: the aggregate of the per-rank values, as
   ``MirroredStrategy`` reads it) or ``v`` itself is (ON_WRITE: as a ``MirroredVariable``
   assigned in replica context). Outside ``strategy.run`` (e.g. ``reset_state()``) and in
   ``strategy.extended.update`` the value is taken as already global.
   So metrics are global everywhere -- step logs, ``fit`` history, ``evaluate()`` -- and
   identical on every rank, and saving them on rank 0 alone needs no collective.

Variables with aggregation NONE or ONLY_FIRST_REPLICA are plain: every rank runs the same
program, so they stay equal when their inputs are (non-synchronized BatchNorm moving
statistics are the exception: they follow each rank's data, as with Horovod).

Exception to rule 1, saves and loads: a variable created while a save or a load runs on
this thread (any save coordinated by ``tfring.saving``, and the loads ``save_hooks`` marks:
``keras.models.load_model``, ``model.load_weights``, ``tf.train.Checkpoint`` save / read /
restore, ``tf.saved_model.load``) is created locally, with no broadcast. Keras and TF create
such variables as throwaways (Keras builds a reference optimizer to list the attributes it
skips, once per process, on whichever rank saves or loads first) or to receive a value read
from the file; and a save or a load may run on one rank only (rank 0 writes, a script loads
on one rank). A broadcast there would wait for ranks that never create the variable. A
variable loaded on every rank takes the file's value on every rank, so rule 1 still holds
for what the file holds; Keras warns about the variables a file does not hold.

Exception to rule 1: Keras random-number states (``SeedGenerator``, variables named
``seed_generator_state``: dropout, noise layers) are not broadcast; their seed is offset by
the rank instead, so each rank draws its own masks for its slice of the batch (with the
same global seed on every rank, rank 0 draws what one process would). Same choice as
``tfring.keras``' broadcasts, which skip these states.
"""

import contextlib
import threading

import tensorflow as tf

from tfring import _private_api
from tfring._distribute import cross_rank
from tfring._saving import coordination

_SYNCED_AGGREGATIONS = (tf.VariableAggregation.SUM, tf.VariableAggregation.MEAN)
_class_cache = {}
_local = threading.local()


@contextlib.contextmanager
def created_locally():
    """Within this block, variables created on this thread under a RingStrategy scope are
    not broadcast from rank 0 (they keep this rank's initial value): for code that may run
    on some ranks only, or whose variables get their values elsewhere (a load)."""
    depth = getattr(_local, "depth", 0)
    _local.depth = depth + 1
    try:
        yield
    finally:
        _local.depth = depth


def creating_locally():
    """True inside ``created_locally()`` or a save coordinated by ``tfring.saving``."""
    return getattr(_local, "depth", 0) > 0 or coordination.current_role() is not None


def create_variable(next_creator, rank, size, **kwargs):
    """Body of ``RingExtended._create_variable`` (after device placement)."""
    aggregation = kwargs.get("aggregation") or tf.VariableAggregation.NONE
    synchronization = kwargs.get("synchronization") or tf.VariableSynchronization.AUTO
    if _is_rng_state(kwargs.get("name")):
        return _rank_offset_rng_state(next_creator(**kwargs), rank)
    in_graph = not tf.executing_eagerly()
    dtype = kwargs.get("dtype")
    share = size > 1 and (dtype is None or cross_rank.can_broadcast(tf.as_dtype(dtype))) and not creating_locally()
    if share and in_graph:
        kwargs["initial_value"] = _broadcast_initial_value(kwargs.get("initial_value"))
    var = next_creator(**kwargs)
    if share and not in_graph and cross_rank.can_broadcast(var.dtype):
        var.assign(cross_rank.broadcast(var.read_value(), 0, kind="init"))
    if size > 1 and aggregation in _SYNCED_AGGREGATIONS and isinstance(var, _private_api.BaseResourceVariable):
        var.__class__ = _synced_class(type(var))
        var._tfring_on_read = synchronization == tf.VariableSynchronization.ON_READ
    return var


def _is_rng_state(name):
    return isinstance(name, str) and name.rsplit("/", 1)[-1].startswith("seed_generator_state")


def _rank_offset_rng_state(var, rank):
    if rank and tf.executing_eagerly() and var.shape == (2,) and var.dtype.is_integer:
        var.assign(var.read_value() + tf.constant([rank, 0], var.dtype))
    return var


def _broadcast_initial_value(initial_value):
    def shared(value):
        value = tf.convert_to_tensor(value)
        return cross_rank.broadcast(value, 0, kind="init") if cross_rank.can_broadcast(value.dtype) else value

    if callable(initial_value):
        return lambda *args, **kwargs: shared(initial_value(*args, **kwargs))
    return shared(initial_value)


def _synced_class(base):
    cls = _class_cache.get(base)
    if cls is None:
        cls = type(base.__name__, (_SyncOnWriteMixin, base), {"__module__": base.__module__})
        _class_cache[base] = cls
    return cls


def _in_ring_replica_context():
    from tfring._distribute.replica_context import RingReplicaContext

    ctx = tf.distribute.get_replica_context()
    return isinstance(ctx, RingReplicaContext) and not _private_api.in_update_context()


class _SyncOnWriteMixin:
    """Placed in front of the variable's class: replica-context writes take every rank's."""

    _tfring_on_read = True

    def _tfring_reduce(self, value):
        op = cross_rank.MEAN if self.aggregation == tf.VariableAggregation.MEAN else cross_rank.SUM
        return cross_rank.all_reduce([tf.convert_to_tensor(value, dtype=self.dtype)], op, kind="var_sync")[0]

    def assign(self, value, use_locking=None, name=None, read_value=True):
        if _in_ring_replica_context():
            value = tf.convert_to_tensor(value, dtype=self.dtype)
            if self._tfring_on_read:
                old = self.read_value()
                value = old + self._tfring_reduce(value - old)
            else:
                value = self._tfring_reduce(value)
        return super().assign(value, use_locking=use_locking, name=name, read_value=read_value)

    def assign_add(self, delta, use_locking=None, name=None, read_value=True):
        if _in_ring_replica_context():
            delta = self._tfring_reduce(delta)
        return super().assign_add(delta, use_locking=use_locking, name=name, read_value=read_value)

    def assign_sub(self, delta, use_locking=None, name=None, read_value=True):
        if _in_ring_replica_context():
            delta = self._tfring_reduce(delta)
        return super().assign_sub(delta, use_locking=use_locking, name=name, read_value=read_value)
