"""One progress report per job: under tfring, only rank 0 prints Keras' progress.

Every rank of a job runs the same ``model.fit(..., verbose="auto")``; N bars redrawing
themselves through one launcher console are unreadable, and N copies of each epoch line
say nothing more than one. Once tfring's Keras integration is in use
(``DistributedOptimizer`` or ``RingStrategy``) and the job has more than one rank, the
``verbose`` of ``fit``, ``evaluate`` and ``predict`` (``"auto"``, 1: the bar; 2: one line
per epoch) becomes 0 on every rank but 0. Callbacks still run on every rank, and the
methods return the same values as before (``evaluate``'s results are rank-local unless the
metrics are made global, docs/keras.md).

Opt out: ``TFRING_PROGRESS_ALL_RANKS=1`` in the environment (every rank draws its bar).
Thread-safety: ``install`` is idempotent under a lock.
"""

import os
import threading

_lock = threading.Lock()
_installed = False
_VERBOSE_POSITION = 4  # Trainer.fit(self, x, y, batch_size, epochs, verbose, callbacks, ...)
_CALLBACKS_POSITION = 5
# evaluate(self, x, y, batch_size, verbose, ...) and predict(self, x, batch_size, verbose, ...)
_OTHER_VERBOSE_POSITIONS = {"evaluate": 3, "predict": 2}
OPT_OUT = "TFRING_PROGRESS_ALL_RANKS"


def silenced_here():
    """True when this rank's Keras progress output is silenced (see the module doc)."""
    from tfring._basics import basics

    if os.environ.get(OPT_OUT, "0") not in ("", "0") or not basics.is_initialized():
        return False
    return basics.size() > 1 and basics.rank() != 0


def _quiet(verbose):
    return 0 if verbose in ("auto", 1, 2, True) else verbose


def _replace_argument(args, kwargs, position, name, default, change):
    """``fit``'s argument ``name`` (at ``position`` when given positionally, else in
    ``kwargs``, updated in place) replaced by ``change(value)``. Returns the new ``args``."""
    if len(args) > position:
        return (*args[:position], change(args[position]), *args[position + 1:])
    kwargs[name] = change(kwargs.get(name, default))
    return args


def install():
    """Wraps ``keras.Model.fit`` once (idempotent). The backend's trainer class
    (``TensorFlowTrainer``) overrides ``Trainer.fit``, so the wrapper goes on ``Model``,
    above it in every model's class order."""
    global _installed
    with _lock:
        if _installed:
            return
        import keras

        from tfring._keras import keras2_arguments, step_agreement

        original = keras.Model.fit

        def fit(self, *args, **kwargs):
            kwargs = keras2_arguments.clean("fit", original, kwargs, stacklevel=2)
            if step_agreement.needs_check(self):  # equal step counts on every rank, checked first
                args = _replace_argument(args, kwargs, _CALLBACKS_POSITION, "callbacks", None,
                                         step_agreement.with_check)
            if silenced_here():
                args = _replace_argument(args, kwargs, _VERBOSE_POSITION, "verbose", "auto", _quiet)
            return original(self, *args, **kwargs)

        fit.__doc__ = original.__doc__
        fit.__wrapped__ = original
        keras.Model.fit = fit
        for name, position in _OTHER_VERBOSE_POSITIONS.items():
            setattr(keras.Model, name, _quiet_on_other_ranks(getattr(keras.Model, name), position))
        _installed = True


def _quiet_on_other_ranks(original, position):
    """``original`` (``Model.evaluate`` / ``predict``) with its ``verbose`` at ``position``
    silenced on every rank but 0."""

    def method(self, *args, **kwargs):
        if silenced_here():
            args = _replace_argument(args, kwargs, position, "verbose", "auto", _quiet)
        return original(self, *args, **kwargs)

    method.__name__ = original.__name__
    method.__doc__ = original.__doc__
    method.__wrapped__ = original
    return method
