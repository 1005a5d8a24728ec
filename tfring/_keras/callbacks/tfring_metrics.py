"""``TfringMetricsCallback``: tfring's communication metrics in TensorBoard."""

import os

import keras
import tensorflow as tf

from tfring._basics import basics, monitoring
from tfring._keras import model_preparation
from tfring._tensorflow import summary


class TfringMetricsCallback(keras.callbacks.Callback):
    """Writes tfring's own metrics for TensorBoard, from ``root_rank`` only, into
    ``log_dir/tfring`` (beside the ``train``/``validation`` runs of Keras' ``TensorBoard``
    callback given the same ``log_dir``, so both show in one dashboard).

    Every epoch (tags ``tfring/epoch_<metric>``, step = epoch) and, with an integer
    ``update_freq``, every ``update_freq`` training batches (tags ``tfring/batch_<metric>``,
    step = batches since the start of training), it writes the interval's bytes reduced,
    bytes sent, achieved allreduce bus bandwidth, time waiting for the slowest rank,
    negotiation time, transfer time, fusion ratio, stall warnings, collectives, and the
    link watch's slow-link verdict (``slow_link_rank``: the lowest rank on the host on a slow
    link, -1 when none; ``slow_link_ratio``; ``slow_link_warnings``) (docs/monitoring.md
    defines each). The other ranks do nothing: no directory, no writer.
    May be given to every rank or to ``root_rank`` only.

    Args:
      log_dir: the folder given to Keras' ``TensorBoard`` (default ``"logs"``).
      update_freq: ``"epoch"``, or an int N to also write every N training batches.
      root_rank: the rank that writes.

    Raises:
      ValueError: ``update_freq`` is neither ``"epoch"`` nor a positive int.

    Example:
      callbacks = [hvd.callbacks.TensorBoard("logs"),
                   hvd.callbacks.TfringMetricsCallback("logs", update_freq=50)]
    """

    def __init__(self, log_dir="logs", update_freq="epoch", root_rank=0):
        super().__init__()
        if update_freq != "epoch" and not (isinstance(update_freq, int) and update_freq > 0):
            raise ValueError(f"update_freq must be 'epoch' or a positive int. Received: update_freq={update_freq!r}")
        self.log_dir = os.fspath(log_dir)
        self.update_freq = update_freq
        self.root_rank = root_rank
        self.active = basics.rank() == root_rank
        self._writer = None
        self._epoch_interval = self._batch_interval = None
        self._train_step = 0

    def set_model(self, model):
        model_preparation.prepare_model(model)
        super().set_model(model)

    def on_train_begin(self, logs=None):
        if not self.active:
            return
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(os.path.join(self.log_dir, "tfring"))
        self._epoch_interval = monitoring.Interval()
        self._batch_interval = monitoring.Interval()

    def on_train_batch_end(self, batch, logs=None):
        if not self.active or self._writer is None:
            return
        self._train_step += 1
        if self.update_freq != "epoch" and self._train_step % self.update_freq == 0:
            self._write(self._batch_interval.take(), "batch_", self._train_step)

    def on_epoch_end(self, epoch, logs=None):
        if self.active and self._writer is not None:
            self._write(self._epoch_interval.take(), "epoch_", epoch)

    def on_train_end(self, logs=None):
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _write(self, metrics, kind, step):
        summary.write_metrics(metrics, step, self._writer, prefix="tfring/" + kind)
