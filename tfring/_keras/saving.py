"""Saving and loading models trained with tfring optimizers.

tfring's optimizer classes serialize exactly as the Keras classes they extend (a model
saved with ``DistributedOptimizer(Adam())`` records ``keras.optimizers.Adam``), so
``keras.models.load_model`` works in any process, with or without tfring, and gives the
plain optimizer. ``tfring.keras.load_model`` loads the same file and re-wraps the
optimizer, keeping its restored state (iterations, slots, loss scale). The serialization
alias itself is registered by serialization.py.
"""

import keras


def load_model(filepath, custom_optimizers=None, custom_objects=None, compile=True, safe_mode=True, **wrap_kwargs):
    """Loads a model saved by ``model.save`` and wraps its optimizer in
    ``tfring.keras.DistributedOptimizer``, keeping the optimizer's saved state.

    Args:
      filepath: a ``.keras`` (or legacy ``.h5``) file.
      custom_optimizers: optimizer classes the file refers to that Keras does not know
        (Horovod's argument; they are added to ``custom_objects`` by class name).
      custom_objects: as for ``keras.models.load_model``.
      compile: as for ``keras.models.load_model``; without compiling there is no optimizer
        to wrap.
      safe_mode: as for ``keras.models.load_model``.
      **wrap_kwargs: passed to ``DistributedOptimizer`` (``compression``, ``op``,
        ``backward_passes_per_step``, ...).

    Returns:
      The model, its optimizer (if any) distributed.

    Example:
      ``model = hvd.load_model("ckpt.keras")`` then ``model.fit(...)`` on every rank.
    """
    from tfring._keras import model_preparation
    from tfring._keras.distributed_optimizer import DistributedOptimizer, is_distributed

    objects = {}
    for cls in custom_optimizers or ():
        objects[cls.__name__] = cls
    objects.update(custom_objects or {})
    model = keras.models.load_model(filepath, custom_objects=objects or None, compile=compile, safe_mode=safe_mode)
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and not is_distributed(optimizer):
        model.optimizer = DistributedOptimizer(optimizer, **wrap_kwargs)
        model_preparation.prepare_model(model)  # compiled before the optimizer was wrapped
    return model
