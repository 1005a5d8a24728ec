"""tfring's communication metrics as ``tf.summary`` scalars, for custom training loops.

    import tfring.tensorflow as hvd

    writer = tf.summary.create_file_writer("logs/tfring") if hvd.rank() == 0 else None
    for step in range(steps):
        train_step(...)                       # a tf.function, with or without RingStrategy
        if step % 100 == 0:
            hvd.summary.write_tfring_metrics(step, writer)

The Keras callback ``hvd.callbacks.TfringMetricsCallback`` does the same inside ``fit``.
The scalars are defined in docs/monitoring.md.
"""

import tensorflow as tf

from tfring._basics import basics, monitoring

# Written scalars (``<prefix><name>``); the rest of interval_metrics' keys are not plotted.
SCALARS = (
    "bytes_reduced",
    "bytes_sent",
    "bus_bandwidth_gbps",
    "wait_for_slowest_seconds",
    "negotiation_seconds",
    "transfer_seconds",
    "fusion_ratio",
    "stall_warnings",
    "slow_link_warnings",
    "slow_link_rank",
    "slow_link_ratio",
    "collectives",
)


def write_metrics(metrics, step, writer=None, prefix="tfring/"):
    """Writes ``metrics`` (a dict from ``tfring.monitoring``) as scalars at ``step``.

    Args:
      metrics: ``{name: value}``; names in ``SCALARS`` are written, others ignored.
      step: the summary step (int).
      writer: a ``tf.summary`` writer; ``None`` uses the default writer (nothing is written
        without one, as with ``tf.summary.scalar``).
      prefix: prepended to every tag.
    """
    def write():
        for name in SCALARS:
            if name in metrics:
                tf.summary.scalar(prefix + name, float(metrics[name]), step=int(step))

    if writer is None:
        write()
        return
    with writer.as_default():
        write()
    writer.flush()


_intervals = {}  # id(writer) -> monitoring.Interval, for write_tfring_metrics


def write_tfring_metrics(step, writer=None, root_rank=0, prefix="tfring/"):
    """Writes tfring's metrics since the previous call with the same ``writer`` (since init
    the first time) as ``tf.summary`` scalars at ``step``, on ``root_rank`` only.

    Call it eagerly between steps (inside or outside ``strategy.scope()``), not inside a
    ``tf.function``: the counters are read from Python.

    Args:
      step: the summary step (int or scalar tensor).
      writer: a ``tf.summary`` writer, or ``None`` for the default writer.
      root_rank: the rank that writes; the others only compute the metrics.
      prefix: prepended to every tag.

    Returns:
      The metrics of the interval (``tfring.monitoring.interval_metrics``), on every rank.

    Raises:
      RuntimeError: called while tracing a ``tf.function``.
    """
    if tf.inside_function():
        raise RuntimeError("write_tfring_metrics reads tfring's counters from Python: call it "
                           "eagerly between steps, not inside a tf.function. Received: a call "
                           "while tracing a function.")
    key = id(writer)
    if key not in _intervals:
        _intervals[key] = monitoring.Interval(since_init=True)
    metrics = _intervals[key].take()
    if basics.rank() == root_rank:
        write_metrics(metrics, int(step), writer, prefix)
    return metrics
