"""Preparing a Keras model that trains with tfring's collectives: a loss-scale optimizer
whose finite check is agreed across ranks.

A model "trains with tfring" when its optimizer is a tfring ``DistributedOptimizer`` (or
tfring's ``LossScaleOptimizer`` around one) or when it was compiled under
``tfring.RingStrategy``. For such a model ``prepare_model`` replaces a Keras
``LossScaleOptimizer`` (``mixed_float16``: Keras wraps the optimizer in its own) by
tfring's, whose finite-gradient check is agreed across ranks (one rank overflowing alone
would skip a step the others take, and hang).

``jit_compile`` is left as the user set it, and "auto" resolves as in plain Keras: tfring's
collectives have XLA lowerings for XLA:CPU and XLA:GPU (docs/keras.md, "XLA"). Only where
they cannot compile (TF sees a GPU but tfring's GPU library with the XLA CUDA handlers is
missing: ``tfring._tensorflow.xla.lowered_here``) is ``jit_compile`` turned off, with one
warning per process saying why.

It runs from three places, from the most to the least convenient: right after
``model.compile`` (``install_compile_hook``, at the first ``DistributedOptimizer``, and
``tfring._distribute.keras_integration``, at the first ``RingStrategy()``, both through the
one ``compile_hook``); in every tfring callback's ``set_model``, which covers models
compiled before the hook existed; and in ``tfring.keras.load_model``.

Also here: ``drop_compiled_functions``, for everyone who must make Keras retrace a model's
train/test/predict functions. Thread-safe.
"""

import sys
import threading
import warnings

from tfring._keras.optimizer_mark import is_distributed

_lock = threading.Lock()
_warned = False

_COMPILED_FUNCTIONS = ("train_function", "test_function", "predict_function")


def drop_compiled_functions(model):
    """Forgets the train/test/predict functions Keras built for ``model`` (traced with XLA
    where it cannot compile them, or with collectives of a former job), so the next call
    retraces them."""
    for attr in _COMPILED_FUNCTIONS:
        if getattr(model, attr, None) is not None:
            setattr(model, attr, None)


def _warn_once(model, reason):
    global _warned
    with _lock:
        if _warned:
            return
        _warned = True
    warnings.warn(
        f"tfring: turning jit_compile off for model '{getattr(model, 'name', model)}': TF sees a GPU "
        f"here, and tfring's XLA CUDA handlers are not available: {reason}. Pass jit_compile=False to "
        "model.compile() to silence this warning.",
        UserWarning,
        stacklevel=3,
    )


def _under_ring_strategy(model):
    # Without tfring._distribute.strategy imported, no model can be under RingStrategy (and
    # a plain callback must not import tfring.distribute to find that out).
    module = sys.modules.get("tfring._distribute.strategy")
    return module is not None and isinstance(getattr(model, "distribute_strategy", None), module.RingStrategy)


def trains_with_tfring(model):
    """True for a model whose optimizer is a tfring one, or that is under RingStrategy."""
    return is_distributed(getattr(model, "optimizer", None)) or _under_ring_strategy(model)


def disable_jit_compile_without_lowering(model):
    """Where tfring's collectives cannot compile (``xla.lowered_here()`` is False: a GPU
    without tfring's XLA CUDA handlers),
    sets ``model.jit_compile = False`` (one warning per process) when it was on, and drops
    train/test/predict functions already built with XLA. Returns True if it changed
    anything."""
    from tfring._tensorflow import xla

    # Read the private field first: the public property resolves "auto" lazily, which is
    # what we want, but only for compiled models.
    if not getattr(model, "compiled", False) and getattr(model, "_jit_compile", None) is None:
        return False
    if not model.jit_compile or xla.lowered_here():
        return False
    _warn_once(model, xla.cuda_handler_status())
    model.jit_compile = False
    drop_compiled_functions(model)
    return True


def upgrade_loss_scale_optimizer(model):
    """Replaces the Keras ``LossScaleOptimizer`` of a model that trains with tfring by
    tfring's ``LossScaleOptimizer`` (same state; only the finite check differs). Returns
    True if it changed anything."""
    import keras

    from tfring._keras.loss_scale_optimizer import LossScaleOptimizer

    optimizer = getattr(model, "optimizer", None)
    if type(optimizer) is keras.optimizers.LossScaleOptimizer:
        optimizer.__class__ = LossScaleOptimizer
        return True
    return False


def prepare_model(model):
    """Agreed loss scaling, and jit_compile off where tfring's collectives cannot compile
    (``disable_jit_compile_without_lowering``), when ``model`` trains with tfring
    (see the module's docstring); a no-op for any other model (and for None)."""
    if model is None or not trains_with_tfring(model):
        return
    upgrade_loss_scale_optimizer(model)
    disable_jit_compile_without_lowering(model)


def install_compile_hook():
    """Models compiled with a tfring optimizer get ``prepare_model`` right after compiling
    (through the one ``compile`` wrapper, ``compile_hook``), and the job gets its progress
    bar. Idempotent; thread-safe."""
    from tfring._keras import compile_hook, progress

    compile_hook.add_preparer(prepare_model, clean_keras2_arguments=True)
    progress.install()  # one progress bar per job
