"""tfring's communication metrics per interval, from the core's counters (``tfring.stats()``).

No TensorFlow here: the Keras callback (``tfring.keras.callbacks.TfringMetricsCallback``) and
the ``tf.summary`` helper (``tfring.tensorflow.summary``) write what ``Interval.take()``
returns. Every metric and its unit is defined in docs/monitoring.md.

Example::

    interval = tfring.monitoring.Interval()
    train_one_epoch()
    print(interval.take())   # {'bytes_reduced': ..., 'bus_bandwidth_gbps': ..., ...}
"""

from tfring._basics import basics

# Counters whose difference over an interval is reported as is.
_DELTAS = (
    "bytes_reduced",
    "bytes_sent",
    "collectives",
    "tensors",
    "stall_warnings",
    "slow_link_warnings",
    "negotiation_seconds",
    "wait_for_slowest_seconds",
    "transfer_seconds",
)


def interval_metrics(before, after):
    """The metrics of the interval between two ``tfring.stats()`` snapshots.

    Args:
      before: the snapshot at the start of the interval (``{}`` for "since init").
      after: the snapshot at its end.

    Returns:
      A dict of floats: the differences of ``bytes_reduced``, ``bytes_sent``,
      ``collectives``, ``tensors``, ``stall_warnings``, ``negotiation_seconds``,
      ``wait_for_slowest_seconds`` and ``transfer_seconds``; ``fusion_ratio`` (tensors per
      collective in the interval, 0 without collectives) and ``bus_bandwidth_gbps``
      (allreduce bytes x 2(n-1)/n / allreduce transfer seconds, in 1e9 bytes/s; 0 for one
      rank or no allreduce); ``slow_link_warnings`` (difference) and, as they stand at the
      end of the interval (rank 0 names the host: link_watch.h), ``slow_link_rank`` (the
      lowest rank on the host on a slow link, -1 when none is named) and
      ``slow_link_ratio`` (how many times faster the other links move data, 0 when none).
    """
    def delta(key):
        return float(after.get(key, 0)) - float(before.get(key, 0))

    out = {key: delta(key) for key in _DELTAS}
    out["fusion_ratio"] = out["tensors"] / out["collectives"] if out["collectives"] > 0 else 0.0
    n = int(after.get("size", 1) or 1)
    seconds = delta("allreduce_transfer_seconds")
    busbw = out["bytes_reduced"] * 2 * (n - 1) / n / seconds if seconds > 0 and n > 1 else 0.0
    out["bus_bandwidth_gbps"] = busbw / 1e9
    ranks = after.get("slow_link_ranks") or []
    out["slow_link_rank"] = float(ranks[0]) if ranks else -1.0
    out["slow_link_ratio"] = float(after.get("slow_link_ratio", 0.0)) if ranks else 0.0
    return out


class Interval:
    """Metrics since the previous ``take()`` (or since construction; with ``since_init``,
    the first interval starts at ``tfring.init()``)."""

    def __init__(self, since_init=False):
        self._last = {} if since_init else basics.stats()

    def take(self):
        """Returns ``interval_metrics`` since the previous call and starts a new interval."""
        now = basics.stats()
        out = interval_metrics(self._last, now)
        self._last = now
        return out
