"""The one wrapper of Keras' ``Trainer.compile``.

tfring adjusts a model that trains with its collectives (a tfring optimizer, or under
``RingStrategy``) right after it is compiled: ``model_preparation.prepare_model`` (XLA off,
an agreed loss scale), registered at the first ``DistributedOptimizer`` and at the first
``RingStrategy()``. Each registers a *preparer*
here, a function of the model that decides by itself whether the model is its concern; the
wrapper runs every preparer after Keras' own ``compile``. Keras-2-only arguments are cleaned
first (``keras2_arguments``) once a preparer asked for it.

Installed once per process, at the first registration; ``Trainer.compile.__wrapped__`` is
Keras' original. Thread-safe.
"""

import threading

_lock = threading.Lock()
_preparers = ()  # replaced, never mutated: compile iterates it without the lock
_clean_keras2_arguments = False
_installed = False


def add_preparer(preparer, clean_keras2_arguments=False):
    """Runs ``preparer(model)`` after every ``model.compile`` from now on (once per
    preparer, however often it is added)."""
    global _clean_keras2_arguments, _installed, _preparers
    with _lock:
        if preparer not in _preparers:
            _preparers = (*_preparers, preparer)
        _clean_keras2_arguments = _clean_keras2_arguments or clean_keras2_arguments
        if _installed:
            return
        from tfring import _private_api

        trainer = _private_api.KerasTrainer
        original = trainer.compile

        def compile(self, *args, **kwargs):
            if _clean_keras2_arguments:
                from tfring._keras import keras2_arguments

                kwargs = keras2_arguments.clean("compile", original, kwargs, stacklevel=2)
            result = original(self, *args, **kwargs)
            for prepare in _preparers:
                prepare(self)
            return result

        compile.__doc__ = original.__doc__
        compile.__wrapped__ = original
        trainer.compile = compile
        _installed = True
