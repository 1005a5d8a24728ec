"""``TensorBoard`` that logs on one rank only."""

import keras

from tfring._basics import basics
from tfring._keras import model_preparation

_HOOKS = (
    "set_model",
    "on_train_begin",
    "on_train_end",
    "on_epoch_begin",
    "on_epoch_end",
    "on_train_batch_begin",
    "on_train_batch_end",
    "on_test_begin",
    "on_test_end",
    "on_test_batch_begin",
    "on_test_batch_end",
    "on_predict_begin",
    "on_predict_end",
    "on_predict_batch_begin",
    "on_predict_batch_end",
)


class TensorBoard(keras.callbacks.TensorBoard):
    """Keras' ``TensorBoard`` (same arguments) that writes event files on ``root_rank``
    only; on the other ranks every hook does nothing (no directory, no writer).

    May be given to every rank or to ``root_rank`` only. Put ``MetricAverageCallback``
    before it to log global epoch metrics.

    Args:
      log_dir, ...: as ``keras.callbacks.TensorBoard``.
      root_rank: the rank that logs (keyword only).
    """

    def __init__(self, *args, root_rank=0, **kwargs):
        super().__init__(*args, **kwargs)
        self.root_rank = root_rank
        self.active = basics.rank() == root_rank


def _rank_only(hook):
    base = getattr(keras.callbacks.TensorBoard, hook)

    def method(self, *args, **kwargs):
        if hook == "set_model":
            model_preparation.prepare_model(args[0] if args else kwargs.get("model"))
            if not self.active:
                keras.callbacks.Callback.set_model(self, *args, **kwargs)
                return None
        if not self.active:
            return None
        return base(self, *args, **kwargs)

    method.__name__ = hook
    method.__doc__ = base.__doc__
    return method


for _hook in _HOOKS:
    setattr(TensorBoard, _hook, _rank_only(_hook))
del _hook
