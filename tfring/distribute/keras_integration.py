"""What Keras 3 needs to train under RingStrategy exactly as on one process.

Installed once, at the first ``RingStrategy()``; each hook acts only for models whose
``distribute_strategy`` is a RingStrategy, and is a no-op otherwise.

* ``predict()``: Keras keeps each replica's rows (``reduce_per_replica(...,
  "concat")`` reduces across workers only for ``MultiWorkerMirroredStrategy``). Here the
  rows of every rank are allgathered per batch, in rank order -- the order of the global
  batch -- so ``predict`` returns all N rows on every rank.
* ``compile()``: under ``mixed_float16`` Keras wraps the optimizer in its
  ``LossScaleOptimizer``, whose finite check sees this rank's gradients only: one rank
  overflowing would skip a step the others take, and hang. It is replaced by
  ``tfring.keras.LossScaleOptimizer`` (same state; the verdict is agreed across ranks).
  ``jit_compile=True`` is turned off with one warning: the collectives have no XLA kernel.

Metrics need no hook: their variables are synchronized on write (``variables``), so
step logs, ``fit`` history and ``evaluate()`` are global and equal on every rank.
"""

import threading
import warnings

from tfring.distribute import _tf_private

_lock = threading.Lock()
_installed = False
_warned_jit = False


def _ring_strategy_of(model):
    from tfring.distribute.strategy import RingStrategy

    strategy = getattr(model, "distribute_strategy", None)
    return strategy if isinstance(strategy, RingStrategy) else None


def install():
    global _installed
    with _lock:
        if _installed:
            return
        _install_predict_gather()
        _install_compile_hook()
        from tfring.keras import progress

        progress.install()  # one progress bar per job
        _installed = True


def _install_predict_gather():
    module = _tf_private.keras_reduce_per_replica_module
    original = module.reduce_per_replica

    def reduce_per_replica(values, strategy, reduction):
        from tfring.distribute.strategy import RingStrategy

        if reduction == "concat" and isinstance(strategy, RingStrategy) and strategy.num_replicas_in_sync > 1:
            import tensorflow as tf

            def gather(v):
                if isinstance(v, tf.Tensor) and v.shape.rank:
                    return strategy.gather(v, axis=0)
                return v

            return tf.nest.map_structure(gather, values)
        return original(values, strategy, reduction)

    reduce_per_replica.__wrapped__ = original
    reduce_per_replica.__doc__ = original.__doc__
    module.reduce_per_replica = reduce_per_replica


def _install_compile_hook():
    from tfring.keras import compile_hook

    compile_hook.add_preparer(_prepare_if_ring_strategy)


def _prepare_if_ring_strategy(model):
    if _ring_strategy_of(model) is not None:
        prepare_model(model)


def prepare_model(model):
    """Agreed loss scaling and jit_compile off, for a model compiled under RingStrategy."""
    global _warned_jit
    optimizer = getattr(model, "optimizer", None)
    keras_lso = _tf_private.keras_loss_scale_optimizer_class()
    if type(optimizer) is keras_lso:
        from tfring.keras import LossScaleOptimizer

        optimizer.__class__ = LossScaleOptimizer
    if getattr(model, "jit_compile", False):
        model.jit_compile = False
        for attr in ("train_function", "test_function", "predict_function"):
            if getattr(model, attr, None) is not None:
                setattr(model, attr, None)
        if not _warned_jit:
            _warned_jit = True
            warnings.warn(
                f"tfring.RingStrategy: turning jit_compile off for model '{model.name}': tfring's "
                "collectives have no XLA kernel. Pass jit_compile=False to model.compile() to "
                "silence this warning.",
                UserWarning,
                stacklevel=3,
            )
