"""Keras callbacks for tfring (``hvd.callbacks``).

Run on every rank: ``BroadcastGlobalVariablesCallback``, ``MetricAverageCallback``,
``LearningRateWarmupCallback``, ``LearningRateScheduleCallback``, ``BackupAndRestore``.
Write on one rank (may be given to all): ``ModelCheckpoint``, ``TensorBoard``,
``TfringMetricsCallback`` (tfring's communication metrics for TensorBoard).
"""

from tfring._api.binding import bind as _bind

__getattr__, __dir__ = _bind(globals())  # the names of tfring.keras.callbacks in tfring/_api/exports.py
