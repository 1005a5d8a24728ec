"""``DistributedOptimizer``: averages gradients across ranks before a Keras 3 optimizer
applies them.

Keras 3 never calls the hooks Horovod overrides (``get_gradients``,
``_compute_gradients``, ``_aggregate_gradients``), so the reduction lives in the public
``apply()`` (``apply_gradients`` calls it) of a class created on the fly: a subclass of the
user's optimizer class with the same name, config and save format, so ``model.save`` and
``keras.models.load_model`` work unchanged. Every rank must call ``apply`` the same number
of times with the same variables (one ``model.fit`` step each).

Under a ``tf.distribute`` strategy (e.g. ``tfring.RingStrategy``) the strategy already
reduces gradients inside Keras' ``apply``: this optimizer then does not reduce again.
"""

import keras
import tensorflow as tf

from tfring._basics.ops import Adasum, Average, Sum
from tfring._keras import model_preparation
from tfring._keras.gradient_accumulation import LocalGradientAccumulator
from tfring._keras.optimizer_mark import is_distributed
from tfring._keras.serialization import register_serialization_alias
from tfring._tensorflow import (
    grad_reduction,
    gradients,  # noqa: F401 - registers the ops' gradients
)
from tfring._tensorflow.compression import Compression
from tfring._tensorflow.local_sources import LocalSources, layer_variables

_class_cache = {}


class _DistributedOptimizerMixin:
    """Placed in front of the user's optimizer class in the MRO; adds no ``__init__``."""

    _tfring_distributed = True

    def _tfring_configure(self, name, compression, sparse_as_dense, op, prescale, postscale, passes, average,
                          bucket_bytes, scale_local_gradients, process_set=None):
        self._tfring_name = name or f"DistributedOptimizer.{self.name}"
        self._tfring_process_set = process_set
        self._tfring_bucket_bytes = bucket_bytes
        self._tfring_compression = compression
        self._tfring_sparse_as_dense = bool(sparse_as_dense)
        self._tfring_op = op
        self._tfring_prescale = float(prescale)
        self._tfring_postscale = float(postscale)
        self._tfring_accumulator = LocalGradientAccumulator(passes, average) if passes > 1 else None
        self._tfring_local_vars = LocalSources()
        self._tfring_scale_local_gradients = bool(scale_local_gradients)

    def register_local_var(self, var):
        """Registers ``var`` as local to this rank: its gradient is not reduced (and is
        divided by the size with ``scale_local_gradients``), Horovod's local variables."""
        self._tfring_local_vars.add(var)

    @property
    def backward_passes_per_step(self):
        return self._tfring_accumulator.passes if self._tfring_accumulator else 1

    def build(self, variables):
        super().build(variables)
        if self._tfring_accumulator is not None and not self._tfring_accumulator.built:
            self._tfring_accumulator.build(variables)

    def apply(self, grads, trainable_variables=None):
        grads = list(grads)
        if grads and tf.distribute.has_strategy() and self._tfring_op == Adasum:
            raise ValueError(
                "DistributedOptimizer(op=Adasum) cannot run under a tf.distribute strategy: the strategy "
                f"reduces the gradients itself (Sum or Mean), so Adasum would be silently replaced. Received "
                f"strategy {type(tf.distribute.get_strategy()).__name__}; create the model and optimizer "
                "outside the strategy's scope (the optimizer then reduces), or use op=Average")
        if not grads or tf.distribute.has_strategy():
            return super().apply(grads, trainable_variables)
        if trainable_variables is not None:
            trainable_variables = list(trainable_variables)
            if not self.built:
                with keras.name_scope(self.name, caller=self):
                    self.build(trainable_variables)
                self.built = True
        variables = list(self._trainable_variables) if trainable_variables is None else trainable_variables
        accumulator = self._tfring_accumulator
        if accumulator is None:
            return super().apply(self._tfring_reduce(grads, variables), trainable_variables)
        if not accumulator.built:  # built before this wrapper was configured
            accumulator.build(self._trainable_variables)
        if trainable_variables is None:
            indices = list(range(len(grads)))
        else:
            indices = [self._get_variable_index(v) for v in trainable_variables]

        def apply_reduced(summed):
            super(_DistributedOptimizerMixin, self).apply(self._tfring_reduce(summed, variables), trainable_variables)

        accumulator.apply(grads, indices, apply_reduced, lambda: self._iterations.assign_add(1))

    def _tfring_reduce(self, grads, variables):
        """Reduces the gradients of ``variables`` across ranks (``grad_reduction.reduce_gradients``:
        buckets of about ``bucket_bytes``, last layers first, each one negotiation, fused;
        overlapping the backward pass inside ``fit``), but those of local variables. With one
        rank: no cost."""
        return grad_reduction.reduce_gradients(
            grads, variables=variables, local_sources=self._tfring_local_vars,
            scale_local_gradients=self._tfring_scale_local_gradients, name=f"{self._tfring_name}.grads",
            sparse_as_dense=self._tfring_sparse_as_dense, bucket_bytes=self._tfring_bucket_bytes,
            op=self._tfring_op, compression=self._tfring_compression, prescale_factor=self._tfring_prescale,
            postscale_factor=self._tfring_postscale, process_set=self._tfring_process_set)


def distributed_class(base):
    """The distributed subclass of optimizer class ``base`` (created once per class)."""
    if getattr(base, "_tfring_distributed", False):
        return base
    cls = _class_cache.get(base)
    if cls is None:
        cls = type(
            base.__name__,
            (_DistributedOptimizerMixin, base),
            {"__module__": base.__module__, "__qualname__": base.__qualname__, "__doc__": base.__doc__},
        )
        register_serialization_alias(cls, base)
        _class_cache[base] = cls
    return cls


def copy_optimizer_state(source, target):
    """Builds ``target`` on ``source``'s variables and copies every optimizer variable
    (iterations, learning rate, slots, loss scale). No-op when ``source`` is not built."""
    if not source.built:
        return
    if not target.built:
        with keras.name_scope(target.name, caller=target):
            target.build(source._trainable_variables)
    src, dst = list(source.variables), list(target.variables)
    if len(src) != len(dst):
        raise ValueError(
            f"Cannot carry the state of optimizer '{source.name}' over to its distributed copy: "
            f"{len(src)} variables vs {len(dst)}."
        )
    for s, d in zip(src, dst):
        d.assign(s)


def DistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="", compression=Compression.none,
                         sparse_as_dense=False, gradient_predivide_factor=1.0, op=Average,
                         backward_passes_per_step=1, average_aggregated_gradients=False,
                         bucket_bytes=grad_reduction.DEFAULT_BUCKET_BYTES, scale_local_gradients=True, process_set=None):
    """Returns a copy of ``optimizer`` that reduces gradients across ranks before applying
    them. Must be used on every rank, and every rank must run the same number of steps.

    The copy is an instance of a subclass of ``type(optimizer)`` with the same name and
    config (``isinstance`` and ``get_config`` are unchanged, saved models record the
    original class). An already built optimizer's state is carried over.

    Args:
      optimizer: a Keras 3 optimizer instance (or a name such as ``"adam"``). A Keras
        ``LossScaleOptimizer`` becomes tfring's, wrapped around its distributed inner
        optimizer. Under the ``mixed_float16`` global policy the result is wrapped in
        tfring's ``LossScaleOptimizer`` (Keras would otherwise wrap it in its own, which
        hangs when only some ranks overflow).
      name: prefix of the collectives' names (default ``"DistributedOptimizer.<name>"``);
        must be equal on every rank and distinct between optimizers that step together.
      device_dense, device_sparse: accepted for Horovod compatibility; ignored (the
        collectives run where the tensors are).
      compression: ``tfring.keras.Compression.none`` or ``.fp16`` (halves the bytes sent).
      sparse_as_dense: reduce ``tf.IndexedSlices`` gradients (embeddings) as dense tensors.
      gradient_predivide_factor: with ``op=Average``, divide by this factor before the sum
        and by ``size / factor`` after it (helps with fp16 overflow).
      op: ``tfring.keras.Average`` (default) or ``Sum``, or ``Adasum``: Horovod's adaptive
        summation of the gradients (float CPU gradients, a power-of-two number of ranks,
        divided by nothing; sparse gradients need ``sparse_as_dense=True``; with
        ``backward_passes_per_step > 1`` the accumulated sums are reduced, never averaged).
        Scale the learning rate less than for Average: see docs/tensorflow.md "Adasum".
      backward_passes_per_step: accumulate this many steps' gradients locally and reduce
        and apply them on the last one (the optimizer's ``iterations`` counts every step).
      average_aggregated_gradients: with ``backward_passes_per_step > 1``, divide the
        accumulated gradients by ``backward_passes_per_step`` (the update then equals one
        step on the larger batch).
      bucket_bytes: dense gradients are reduced in buckets of about this many bytes, last
        layers first, so communication overlaps the rest of the backward pass (default
        4 MiB; 0: all gradients in one group, reduced only once every one exists). Not in
        Horovod.
      scale_local_gradients: divide the gradients of variables registered with
        ``register_local_var`` (kept on their rank, not reduced) by the size (Horovod's
        default).
      process_set: a registered ``tfring.keras.ProcessSet``: gradients are reduced over its
        members only (Average divides by its size); a rank outside the set applies its own
        gradients (docs/tensorflow.md "Process sets"). None: every rank.

    Returns:
      The distributed optimizer (a new object; ``optimizer`` is left unchanged).

    Raises:
      ValueError: a bad argument (the message says which).
      TypeError: ``optimizer`` is not a Keras 3 optimizer.

    Example:
      ``opt = hvd.DistributedOptimizer(keras.optimizers.Adadelta(1.0 * hvd.size()))``
    """
    del device_dense, device_sparse
    if isinstance(optimizer, str):
        optimizer = keras.optimizers.get(optimizer)
    average_aggregated_gradients = _check_arguments(optimizer, gradient_predivide_factor, op,
                                                    backward_passes_per_step, average_aggregated_gradients)
    wrap = {
        "name": name,
        "compression": compression,
        "sparse_as_dense": sparse_as_dense,
        "gradient_predivide_factor": gradient_predivide_factor,
        "op": op,
        "backward_passes_per_step": backward_passes_per_step,
        "average_aggregated_gradients": average_aggregated_gradients,
        "bucket_bytes": bucket_bytes,
        "scale_local_gradients": scale_local_gradients,
        "process_set": process_set,
    }
    model_preparation.install_compile_hook()
    if isinstance(optimizer, keras.optimizers.LossScaleOptimizer):
        return _wrap_loss_scale_optimizer(optimizer, wrap)
    return _distributed_copy(optimizer, **wrap)


def _check_arguments(optimizer, gradient_predivide_factor, op, backward_passes_per_step,
                     average_aggregated_gradients):
    """``DistributedOptimizer``'s argument checks; returns ``average_aggregated_gradients``
    (False when there is nothing to average over)."""
    if not isinstance(optimizer, keras.optimizers.Optimizer):
        raise TypeError(
            "DistributedOptimizer expects a Keras 3 optimizer (keras.optimizers.Optimizer). "
            f"Received: {type(optimizer).__name__}"
        )
    if is_distributed(optimizer):
        raise ValueError(f"Optimizer '{optimizer.name}' is already a tfring DistributedOptimizer.")
    if isinstance(op, bool) or op not in (Average, Sum, Adasum):
        raise ValueError(f"op must be tfring.keras.Average, Sum or Adasum. Received: op={op!r}")
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError(
            "gradient_predivide_factor is only supported with op=Average. "
            f"Received: gradient_predivide_factor={gradient_predivide_factor}, op={op!r}"
        )
    if not gradient_predivide_factor > 0:
        raise ValueError(f"gradient_predivide_factor must be > 0. Received: {gradient_predivide_factor}")
    if op == Adasum and average_aggregated_gradients:
        raise ValueError("op=Adasum does not support average_aggregated_gradients=True (Horovod's rule); "
                         "leave it False")
    # backward_passes_per_step == 1: Horovod accepts and ignores it; nothing to average over.
    return average_aggregated_gradients and backward_passes_per_step != 1


def _wrap_loss_scale_optimizer(optimizer, wrap):
    """A Keras ``LossScaleOptimizer``: tfring's, around the distributed inner optimizer,
    with the same settings and state."""
    from tfring._keras.loss_scale_optimizer import LossScaleOptimizer

    inner = DistributedOptimizer(optimizer.inner_optimizer, **wrap)
    result = LossScaleOptimizer(
        inner,
        initial_scale=optimizer.initial_scale,
        dynamic_growth_steps=optimizer.dynamic_growth_steps,
        name=optimizer.name,
    )
    copy_optimizer_state(optimizer, result)
    return result


def _distributed_copy(optimizer, name, compression, sparse_as_dense, gradient_predivide_factor, op,
                      backward_passes_per_step, average_aggregated_gradients, bucket_bytes, scale_local_gradients,
                      process_set):
    """The distributed copy of a plain Keras optimizer, with ``optimizer``'s config and state
    (in tfring's ``LossScaleOptimizer`` under the ``mixed_float16`` global policy)."""
    from tfring._keras.loss_scale_optimizer import LossScaleOptimizer

    # LocalGradientAccumulator validates backward_passes_per_step.
    LocalGradientAccumulator(backward_passes_per_step, average_aggregated_gradients)
    cls = distributed_class(type(optimizer))
    result = cls.from_config(optimizer.get_config())
    result._tfring_configure(
        name,
        compression,
        sparse_as_dense,
        op,
        1.0 / gradient_predivide_factor,
        gradient_predivide_factor,
        backward_passes_per_step,
        average_aggregated_gradients,
        int(bucket_bytes),
        scale_local_gradients,
        process_set,
    )
    copy_optimizer_state(optimizer, result)
    if keras.mixed_precision.global_policy().name == "mixed_float16":
        return LossScaleOptimizer(result, name="loss_scale_optimizer")
    return result


def PartialDistributedOptimizer(optimizer, name=None, device_dense="", device_sparse="",
                                compression=Compression.none, sparse_as_dense=False,
                                gradient_predivide_factor=1.0, op=Average, backward_passes_per_step=1,
                                average_aggregated_gradients=False, local_layers=None, scale_local_gradients=True,
                                bucket_bytes=grad_reduction.DEFAULT_BUCKET_BYTES, process_set=None):
    """``DistributedOptimizer`` whose ``local_layers`` (a Keras layer or a list) keep their
    own rank's gradients: their trainable variables are registered with
    ``register_local_var``. Horovod's ``PartialDistributedOptimizer``; see
    ``DistributedOptimizer`` for the other arguments. Raises ``ValueError`` when
    ``local_layers`` holds something that is not a layer."""
    local = layer_variables(local_layers)
    result = DistributedOptimizer(optimizer, name=name, device_dense=device_dense, device_sparse=device_sparse,
                                  compression=compression, sparse_as_dense=sparse_as_dense,
                                  gradient_predivide_factor=gradient_predivide_factor, op=op,
                                  backward_passes_per_step=backward_passes_per_step,
                                  average_aggregated_gradients=average_aggregated_gradients,
                                  bucket_bytes=bucket_bytes, scale_local_gradients=scale_local_gradients,
                                  process_set=process_set)
    for variable in local:
        result.register_local_var(variable)
    return result
