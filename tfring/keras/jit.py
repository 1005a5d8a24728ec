"""XLA (``jit_compile``) and tfring: turn it off with one warning instead of failing.

tfring's collectives are asynchronous custom ops with no XLA kernel, so a training step
that reduces gradients cannot be XLA-compiled. Keras 3 resolves ``jit_compile="auto"`` to
True on a GPU without a strategy, which would make every Horovod-style script fail there.

Three places act, from the most to the least convenient:

* ``model.compile`` (hooked once, when the first ``DistributedOptimizer`` is created):
  when the compiled optimizer is a tfring one, ``jit_compile`` is set to False with one
  warning per process. The same hook replaces a Keras ``LossScaleOptimizer`` that Keras
  wrapped around a tfring optimizer (``mixed_float16`` set on the model only) by tfring's,
  whose finite-gradient check is agreed across ranks.
* every tfring callback's ``set_model`` does the same (``prepare_model``), which covers
  models compiled before the hook was installed.
* ``raise_if_in_xla_context`` gives a clear error at trace time for what cannot be fixed
  from outside, e.g. a custom loop in ``tf.function(jit_compile=True)``.
"""

import threading
import warnings

_lock = threading.Lock()
_warned = False


def _warn_once(model):
    global _warned
    with _lock:
        if _warned:
            return
        _warned = True
    warnings.warn(
        f"tfring: turning jit_compile off for model '{getattr(model, 'name', model)}': tfring's "
        "collectives have no XLA kernel, so the training step cannot be XLA-compiled. Pass "
        "jit_compile=False to model.compile() to silence this warning.",
        UserWarning,
        stacklevel=3,
    )


def _optimizer_uses_tfring(optimizer):
    if optimizer is None:
        return False
    if getattr(optimizer, "_tfring_distributed", False):
        return True
    inner = getattr(optimizer, "inner_optimizer", None)
    return bool(getattr(inner, "_tfring_distributed", False))


def disable_jit_compile(model):
    """Sets ``model.jit_compile = False`` (one warning per process) when it was on, and
    drops train/test/predict functions already built with XLA. Returns True if it changed
    anything."""
    # Read the private field first: the public property resolves "auto" lazily, which is
    # what we want, but only for compiled models.
    if not getattr(model, "compiled", False) and getattr(model, "_jit_compile", None) is None:
        return False
    if not model.jit_compile:
        return False
    _warn_once(model)
    model.jit_compile = False
    for attr in ("train_function", "test_function", "predict_function"):
        if getattr(model, attr, None) is not None:
            setattr(model, attr, None)
    return True


def upgrade_loss_scale_optimizer(model):
    """Replaces a Keras ``LossScaleOptimizer`` wrapped around a tfring optimizer by tfring's
    ``LossScaleOptimizer`` (same state; only the finite check differs). Returns True if it
    changed anything."""
    import keras

    from tfring.keras.loss_scale_optimizer import LossScaleOptimizer

    optimizer = getattr(model, "optimizer", None)
    if (
        isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
        and not isinstance(optimizer, LossScaleOptimizer)
        and type(optimizer) is keras.optimizers.LossScaleOptimizer
        and getattr(optimizer.inner_optimizer, "_tfring_distributed", False)
    ):
        optimizer.__class__ = LossScaleOptimizer
        return True
    return False


def prepare_model(model):
    """What every tfring callback does in ``set_model``: jit_compile off and agreed loss
    scaling, when the model trains with a tfring optimizer."""
    if model is None or not _optimizer_uses_tfring(getattr(model, "optimizer", None)):
        return
    upgrade_loss_scale_optimizer(model)
    disable_jit_compile(model)


def install_compile_hook():
    """Models compiled with a tfring optimizer get ``prepare_model`` right after compiling
    (through the one ``compile`` wrapper, ``compile_hook``), and the job gets its progress
    bar. Idempotent; thread-safe."""
    from tfring.keras import compile_hook, progress

    compile_hook.add_preparer(prepare_model, clean_keras2_arguments=True)
    progress.install()  # one progress bar per job


def in_xla_context():
    """True while tracing inside an XLA-compiled function (tfring.tensorflow's check)."""
    import tensorflow as tf

    from tfring.tensorflow import xla

    return not tf.executing_eagerly() and xla.in_xla_context(tf.compat.v1.get_default_graph())


def raise_if_in_xla_context(what):
    if in_xla_context():
        raise ValueError(
            f"{what} cannot run inside an XLA-compiled function (jit_compile=True): tfring's "
            "collectives have no XLA kernel. Compile the model with jit_compile=False, pass a "
            "tfring callback to fit() (it turns XLA off), or drop jit_compile=True from your "
            "tf.function."
        )
