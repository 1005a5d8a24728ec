"""TF1 graph-mode training (``tf.compat.v1``): Horovod's classic script runs unchanged.

    opt = tf.compat.v1.train.AdagradOptimizer(0.01 * hvd.size())
    opt = hvd.DistributedOptimizer(opt)
    train_op = opt.minimize(loss, global_step=global_step)
    hooks = [hvd.BroadcastGlobalVariablesHook(0)]
    with tf.compat.v1.train.MonitoredTrainingSession(
            checkpoint_dir=ckpt if hvd.rank() == 0 else None, hooks=hooks) as sess: ...
"""

import tensorflow as tf

from tfring._bootstrap import providers
from tfring._tensorflow import mpi_ops
from tfring._tensorflow.compression import Compression
from tfring._tensorflow.functions import broadcast_variables
from tfring._tensorflow.grad_reduction import make_allreduce_grads_fn, reduce_gradients


class _WrappedOptimizer(tf.compat.v1.train.Optimizer):
    """A v1 optimizer that hands everything to the wrapped one; subclasses change one step."""

    def __init__(self, optimizer, name, use_locking):
        super().__init__(name=name, use_locking=use_locking)
        self._optimizer = optimizer

    def compute_gradients(self, *args, **kwargs):
        return self._optimizer.compute_gradients(*args, **kwargs)

    def apply_gradients(self, *args, **kwargs):
        return self._optimizer.apply_gradients(*args, **kwargs)

    def get_slot(self, *args, **kwargs):
        return self._optimizer.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._optimizer.get_slot_names(*args, **kwargs)

    def variables(self, *args, **kwargs):
        return self._optimizer.variables(*args, **kwargs)


class _DistributedOptimizer(_WrappedOptimizer):
    """A v1 optimizer whose ``compute_gradients`` allreduces the gradients of the wrapped
    one (one grouped allreduce); everything else is delegated."""

    def __init__(self, optimizer, name=None, use_locking=False, device_dense="", device_sparse="",
                 compression=Compression.none, sparse_as_dense=False, op=mpi_ops.Average,
                 gradient_predivide_factor=1.0, process_set=None):
        if name is None:
            name = f"Distributed{type(optimizer).__name__}"
        super().__init__(optimizer, name, use_locking)
        self._allreduce_grads = make_allreduce_grads_fn(name, device_dense, device_sparse, compression,
                                                        sparse_as_dense, op, gradient_predivide_factor,
                                                        process_set=process_set)

    def compute_gradients(self, *args, **kwargs):
        grads_and_vars = self._optimizer.compute_gradients(*args, **kwargs)
        if not grads_and_vars:
            return grads_and_vars
        grads, variables = zip(*grads_and_vars)
        return list(zip(self._allreduce_grads(grads), variables))


class DistributedAdasumOptimizer(_WrappedOptimizer):
    """Horovod's delta optimizer for ``op=hvd.Adasum`` (its Adasum guide): each rank applies the
    wrapped optimizer to its own gradients (a local step), then every variable with a
    gradient becomes start + Adasum over ranks of (its value after the step - start), where
    start is its value before. Adasum so sees whole optimizer steps (momentum, Adam's
    scaling), not raw gradients; ``compute_gradients`` reduces nothing.

    Differs from Horovod 0.28's ``_DistributedAdasumOptimizer``, whose ``apply_gradients``
    (so ``minimize``) is the wrapped optimizer's own and never exchanges the deltas: here it
    does. Graph mode, ``tf.function`` and eager. Not thread-safe (like any v1 optimizer).
    """

    def __init__(self, optimizer, name=None, use_locking=False, device_dense="", device_sparse="",
                 compression=Compression.none):
        if name is None:
            name = f"DistributedDelta{type(optimizer).__name__}"  # Horovod's default name
        super().__init__(optimizer, name, use_locking)
        self._locking = use_locking
        self._reduce_kwargs = {"op": mpi_ops.Adasum, "compression": compression,
                               "device_dense": device_dense, "device_sparse": device_sparse}

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """The local step, then the Adasum of the deltas. Returns the op (eagerly: runs it)."""
        grads_and_vars = list(grads_and_vars)
        variables = [v for g, v in grads_and_vars if g is not None]
        starts = [tf.identity(v.read_value()) for v in variables]
        with tf.control_dependencies(starts):
            step = self._optimizer.apply_gradients(grads_and_vars, global_step=global_step, name=name)
        with tf.control_dependencies([step] if step is not None else []):
            deltas = [v.read_value() - s for v, s in zip(variables, starts)]
        combined = reduce_gradients(deltas, name=None, **self._reduce_kwargs)
        return tf.group(*[v.assign(s + d, use_locking=self._locking) for v, s, d in
                          zip(variables, starts, combined)])


def DistributedOptimizer(optimizer, name=None, use_locking=False, device_dense="", device_sparse="",
                         compression=Compression.none, sparse_as_dense=False, op=mpi_ops.Average,
                         gradient_predivide_factor=1.0, backward_passes_per_step=1, process_set=None,
                         average_aggregated_gradients=False):
    """Wraps a ``tf.compat.v1.train.Optimizer`` so that its gradients are averaged over
    every rank before they are applied (a Keras optimizer goes to
    ``tfring.keras.DistributedOptimizer``). With ``process_set``, over its members only; a
    rank outside the set applies its own gradients. ``average_aggregated_gradients`` only
    matters with ``backward_passes_per_step`` > 1 (Keras optimizers); for a v1 optimizer it
    is accepted and changes nothing, as in Horovod with one pass per step.

    ``backward_passes_per_step`` other than 1 (local gradient accumulation) is supported only
    for Keras optimizers. With ``op=Adasum`` a v1 optimizer becomes Horovod's delta optimizer
    (``DistributedAdasumOptimizer``: a local step, then the Adasum of the variables' deltas).
    """
    if isinstance(optimizer, tf.compat.v1.train.Optimizer):
        if backward_passes_per_step != 1:
            raise ValueError("backward_passes_per_step > 1 is not supported for tf.compat.v1 optimizers; "
                             f"use tfring.keras.DistributedOptimizer. Received: {backward_passes_per_step}")
        if op == mpi_ops.Adasum and not isinstance(op, bool):
            # Horovod's delta optimizer: a local step, then the Adasum of the deltas.
            if gradient_predivide_factor != 1.0:
                raise ValueError("gradient_predivide_factor is only supported with op=hvd.Average. "
                                 f"Received: gradient_predivide_factor={gradient_predivide_factor}")
            return DistributedAdasumOptimizer(optimizer, name, use_locking, device_dense, device_sparse, compression)
        return _DistributedOptimizer(optimizer, name, use_locking, device_dense, device_sparse, compression,
                                     sparse_as_dense, op, gradient_predivide_factor, process_set)
    try:
        import keras
    except ImportError:  # pragma: no cover
        keras = None
    if keras is not None and isinstance(optimizer, keras.optimizers.Optimizer):
        kwargs = {"device_dense": device_dense, "device_sparse": device_sparse, "compression": compression,
                  "sparse_as_dense": sparse_as_dense, "op": op,
                  "gradient_predivide_factor": gradient_predivide_factor,
                  "backward_passes_per_step": backward_passes_per_step, "process_set": process_set,
                  "average_aggregated_gradients": average_aggregated_gradients}
        if name is not None:
            kwargs["name"] = name
        return providers.get("keras_optimizer")(optimizer, **kwargs)
    raise TypeError("DistributedOptimizer expects a tf.compat.v1.train.Optimizer or a Keras optimizer. "
                    f"Received: {type(optimizer).__name__}")


def broadcast_global_variables(root_rank):
    """The op that assigns ``root_rank``'s values to every global variable (graph mode
    only; eagerly use ``broadcast_variables(model.variables, root_rank)``)."""
    if tf.executing_eagerly():
        raise RuntimeError("hvd.broadcast_global_variables() needs graph mode (tf.compat.v1); with eager "
                           "execution use hvd.broadcast_variables(variables, root_rank)")
    return broadcast_variables(tf.compat.v1.global_variables(), root_rank)


class BroadcastGlobalVariablesHook(tf.compat.v1.train.SessionRunHook):
    """Broadcasts every global variable from ``root_rank`` once the session is created
    (after initialization or restore from a checkpoint), so every rank starts equal.

    ``MonitoredTrainingSession`` treats ``UnavailableError`` (what a dead peer gives) as a
    preemption: it closes the session and creates a new one, forever. A tfring job cannot
    recover from a lost rank, so when the same hook sees its session created a second time
    after a failure it raises ``FailedPreconditionError`` instead (which ends the loop)."""

    def __init__(self, root_rank, device=""):
        super().__init__()
        self.root_rank = root_rank
        self.device = device
        self.bcast_op = None
        self._sessions_created = 0

    def begin(self):
        if self.bcast_op is None or self.bcast_op.graph != tf.compat.v1.get_default_graph():
            with tf.device(self.device):
                self.bcast_op = broadcast_global_variables(self.root_rank)

    def after_create_session(self, session, coord):
        self._sessions_created += 1
        if self._sessions_created > 1:
            raise tf.errors.FailedPreconditionError(
                None, None,
                "tfring: MonitoredTrainingSession is re-creating its session after an error (it treats "
                "UnavailableError, a lost rank, as a preemption); a tfring job cannot continue once a rank "
                "is lost. Restart the whole job, e.g. from the last checkpoint.")
        session.run(self.bcast_op)
