"""tfring's communication metrics per interval, from the core's counters (``tfring.stats()``).

    interval = tfring.monitoring.Interval()
    train_one_epoch()
    print(interval.take())   # {'bytes_reduced': ..., 'bus_bandwidth_gbps': ..., ...}

Every metric and its unit is defined in docs/monitoring.md. A face: the implementation is
tfring/_basics/monitoring.py.
"""

from tfring._api.binding import bind as _bind

__getattr__, __dir__ = _bind(globals())  # the names of tfring.monitoring in tfring/_api/exports.py
