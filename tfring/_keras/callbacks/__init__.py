"""The implementation of ``tfring.keras.callbacks`` (private).

Run on every rank: ``BroadcastGlobalVariablesCallback``, ``MetricAverageCallback``,
``LearningRateWarmupCallback``, ``LearningRateScheduleCallback``, ``BackupAndRestore``.
Write on one rank (may be given to all): ``ModelCheckpoint``, ``TensorBoard``,
``TfringMetricsCallback`` (tfring's communication metrics for TensorBoard).
"""
