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
  That is ``tfring._keras.model_preparation.prepare_model``, the same as for a model with a
  tfring optimizer. ``jit_compile`` stays as the user set it (the collectives compile with
  XLA, on XLA:CPU and XLA:GPU), except where TF sees a GPU and tfring's XLA CUDA handlers
  are missing (off, with one warning saying why).

Metrics need no hook: their variables are synchronized on write (``variables``), so
step logs, ``fit`` history and ``evaluate()`` are global and equal on every rank.
"""

import threading

from tfring import _private_api

_lock = threading.Lock()
_installed = False


def install(strategy_class):
    """Installs the hooks (once), for models under ``strategy_class`` (``RingStrategy``, which
    calls this: passed in, so that this module needs no import of strategy.py)."""
    global _installed
    with _lock:
        if _installed:
            return
        _install_predict_gather(strategy_class)
        _install_compile_hook()
        from tfring._keras import progress

        progress.install()  # one progress bar per job
        _installed = True


def _install_predict_gather(strategy_class):
    module = _private_api.keras_reduce_per_replica_module
    original = module.reduce_per_replica

    def reduce_per_replica(values, strategy, reduction):
        if reduction == "concat" and isinstance(strategy, strategy_class) and strategy.num_replicas_in_sync > 1:
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
    from tfring._keras import compile_hook, model_preparation

    # prepare_model acts on models under RingStrategy (and those with a tfring optimizer).
    compile_hook.add_preparer(model_preparation.prepare_model)
