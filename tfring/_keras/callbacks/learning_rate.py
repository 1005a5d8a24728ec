"""Learning-rate schedule and warmup callbacks with Horovod's semantics on Keras 3.

The learning rate is set through ``optimizer.learning_rate`` (a Keras 3 variable), before
each batch. The optimizer must have been created with a float learning rate, not a
``LearningRateSchedule``.

Momentum correction (Goyal et al., 2017) needs the momentum as a variable; Keras 3
optimizers hold it as a Python float that is compiled into the training step as a
constant, so it is applied only when ``optimizer.momentum`` is a variable, and otherwise
skipped with one warning.
"""

import warnings

import keras
import numpy as np

from tfring._basics import basics
from tfring._keras import model_preparation


def _get_lr(optimizer):
    return float(np.asarray(keras.ops.convert_to_numpy(optimizer.learning_rate)))


def _set_lr(optimizer, value):
    try:
        optimizer.learning_rate = float(value)
    except TypeError as e:
        raise TypeError(
            "tfring's learning-rate callbacks set optimizer.learning_rate, so the optimizer must be "
            "created with a float learning rate, not a LearningRateSchedule. "
            f"Received: {type(optimizer._learning_rate).__name__}"
        ) from e


def _is_variable(value):
    return hasattr(value, "assign") and hasattr(value, "dtype")


class LearningRateScheduleCallback(keras.callbacks.Callback):
    """Sets the learning rate to ``initial_lr * multiplier(epoch)`` between ``start_epoch``
    (inclusive) and ``end_epoch`` (exclusive).

    Runs on every rank (each rank sets its own optimizer; the values are equal everywhere).

    Args:
      initial_lr: the reference learning rate (usually the scaled one, e.g. ``1.0 * size``).
        Required, as in Horovod.
      multiplier: a number (constant factor, forces ``staircase``) or a function of the
        epoch. With ``staircase=True`` it is called with the integer epoch at each epoch's
        first batch; otherwise before every batch with the fractional epoch
        ``epoch + batch / steps_per_epoch``.
      start_epoch, end_epoch: the epochs in which the callback acts (``end_epoch=None``:
        until the end).
      staircase: see ``multiplier``.
      momentum_correction: scale the momentum by ``new_lr / old_lr`` for the batch after a
        change (only when the optimizer's momentum is a variable; see the module doc).
      steps_per_epoch: batches per epoch; needed when not ``staircase`` and Keras cannot
        tell (``params["steps"]`` is None for an unsized dataset).
      initial_lr, multiplier and the epoch range follow Horovod's ``LearningRateScheduleCallback``.

    At the end of each epoch the current learning rate is written to the logs as ``lr``.
    """

    def __init__(
        self,
        initial_lr,
        multiplier,
        start_epoch=0,
        end_epoch=None,
        staircase=True,
        momentum_correction=True,
        steps_per_epoch=None,
    ):
        super().__init__()
        if initial_lr is None:
            raise ValueError("Parameter `initial_lr` is required")
        self.initial_lr = initial_lr
        self.start_epoch = start_epoch
        self.end_epoch = end_epoch
        self.staircase = staircase
        self.momentum_correction = momentum_correction
        self.steps_per_epoch = steps_per_epoch
        self.current_epoch = None
        self._restore_momentum = None
        if not callable(multiplier):
            self.staircase = True
            factor = multiplier
            self.multiplier = lambda epoch: factor
        else:
            self.multiplier = multiplier

    def set_model(self, model):
        super().set_model(model)
        model_preparation.prepare_model(model)

    def _autodetect_steps_per_epoch(self):
        steps = (self.params or {}).get("steps")
        if steps:
            return steps
        raise ValueError(
            f"Could not autodetect the number of steps per epoch; pass steps_per_epoch to "
            f"{type(self).__name__}() (or fit(steps_per_epoch=...))."
        )

    def _adjust_learning_rate(self, epoch):
        optimizer = self.model.optimizer
        old_lr = _get_lr(optimizer)
        new_lr = self.initial_lr * self.multiplier(epoch)
        _set_lr(optimizer, new_lr)
        if not self.momentum_correction or old_lr == 0:
            return
        momentum = getattr(optimizer, "momentum", None)
        if _is_variable(momentum):
            self._restore_momentum = float(keras.ops.convert_to_numpy(momentum))
            momentum.assign(self._restore_momentum * new_lr / old_lr)
        elif momentum and new_lr != old_lr:
            _warn_momentum_once()

    def _restore_momentum_if_needed(self):
        if self._restore_momentum is not None:
            self.model.optimizer.momentum.assign(self._restore_momentum)
            self._restore_momentum = None

    def on_train_begin(self, logs=None):
        if not self.staircase and not self.steps_per_epoch:
            self.steps_per_epoch = self._autodetect_steps_per_epoch()

    def on_epoch_begin(self, epoch, logs=None):
        self.current_epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        epoch = self.current_epoch
        if epoch < self.start_epoch or (self.end_epoch is not None and epoch >= self.end_epoch):
            return
        if self.staircase:
            if batch == 0:
                self._adjust_learning_rate(epoch)
        else:
            self._adjust_learning_rate(epoch + float(batch) / self.steps_per_epoch)

    def on_train_batch_end(self, batch, logs=None):
        self._restore_momentum_if_needed()

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["learning_rate"] = _get_lr(self.model.optimizer)


class LearningRateWarmupCallback(LearningRateScheduleCallback):
    """Gradual warmup (Goyal et al., 2017): starts at ``initial_lr / size`` and rises
    linearly to ``initial_lr`` over ``warmup_epochs``, adjusting before every batch.

    Runs on every rank. ``initial_lr`` is the scaled learning rate (e.g. ``1.0 * size``).
    Horovod's formula: ``lr = initial_lr / size * (e * (size - 1) / warmup_epochs + 1)``
    with ``e = epoch + (batch + 1) / steps_per_epoch``, so each epoch ends on a round value.

    Args:
      initial_lr: the learning rate reached at the end of the warmup.
      warmup_epochs: length of the warmup.
      momentum_correction, steps_per_epoch: as in ``LearningRateScheduleCallback``.
      verbose: 1 prints a line when the warmup ends (on rank 0).
    """

    def __init__(self, initial_lr, warmup_epochs=5, momentum_correction=True, steps_per_epoch=None, verbose=0):
        def multiplier(epoch):
            epoch += 1.0 / self.steps_per_epoch
            size = basics.size()
            return 1.0 / size * (epoch * (size - 1) / warmup_epochs + 1)

        super().__init__(
            initial_lr,
            multiplier,
            start_epoch=0,
            end_epoch=warmup_epochs,
            staircase=False,
            momentum_correction=momentum_correction,
            steps_per_epoch=steps_per_epoch,
        )
        self.warmup_epochs = warmup_epochs
        self.verbose = verbose

    def on_epoch_end(self, epoch, logs=None):
        super().on_epoch_end(epoch, logs)
        if epoch == self.end_epoch - 1 and self.verbose > 0 and basics.rank() == 0:
            print(f"\nEpoch {epoch + 1}: finished gradual learning rate warmup to {_get_lr(self.model.optimizer):g}.")


_momentum_warned = False


def _warn_momentum_once():
    global _momentum_warned
    if _momentum_warned:
        return
    _momentum_warned = True
    warnings.warn(
        "tfring: momentum correction skipped: this Keras 3 optimizer holds its momentum as a Python "
        "float compiled into the training step. Pass momentum_correction=False to silence this warning.",
        UserWarning,
        stacklevel=3,
    )
