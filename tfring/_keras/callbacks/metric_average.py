"""``MetricAverageCallback``: epoch metrics averaged over ranks."""

import zlib

import keras
import numpy as np

from tfring._basics import basics, ops
from tfring._keras import model_preparation


def average_logs(logs, name):
    """Replaces every scalar in ``logs`` by its mean over ranks (in place; two small
    collectives). Raises ValueError when ranks log different metric names."""
    if logs is None or basics.size() == 1:
        return logs
    keys = sorted(k for k, v in logs.items() if np.ndim(v) == 0 and np.issubdtype(np.asarray(v).dtype, np.number))
    signature = zlib.crc32("\0".join(keys).encode())
    signatures = ops.allgather(np.array([signature], np.int64), name=f"{name}.keys")
    if len(set(signatures.tolist())) != 1:
        raise ValueError(
            f"MetricAverageCallback: ranks log different metrics; rank {basics.rank()} has {keys}. "
            "Every rank must compile the same metrics and run the same validation."
        )
    if not keys:
        return logs
    values = np.array([float(logs[k]) for k in keys], dtype=np.float64)
    averaged = ops.allreduce(values, op=ops.Average, name=f"{name}.values")
    for k, v in zip(keys, averaged.tolist()):
        logs[k] = v
    return logs


class MetricAverageCallback(keras.callbacks.Callback):
    """Averages the metrics in the epoch logs (``val_*`` included) over ranks at the end of
    each epoch, and those of ``model.evaluate`` when passed to it.

    Must run on every rank, and before the callbacks that read the metrics
    (``ModelCheckpoint(save_best_only=True)``, ``ReduceLROnPlateau``, ``EarlyStopping``,
    ``TensorBoard``): put it early in the list. Each rank's values weigh the same.

    Args:
      device: accepted for Horovod compatibility; ignored.
    """

    def __init__(self, device=""):
        super().__init__()
        del device

    def set_model(self, model):
        super().set_model(model)
        model_preparation.prepare_model(model)

    def on_epoch_end(self, epoch, logs=None):
        average_logs(logs, "tfring.keras.metric_average.epoch")

    def on_test_end(self, logs=None):
        average_logs(logs, "tfring.keras.metric_average.test")
