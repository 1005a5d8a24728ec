"""tfring's communication metrics as ``tf.summary`` scalars, for custom training loops
(``hvd.summary.write_tfring_metrics(step, writer)``; docs/monitoring.md). A face: the
implementation is tfring/_tensorflow/summary.py.
"""

from tfring._api.binding import bind as _bind

__getattr__, __dir__ = _bind(globals())  # the names of tfring.tensorflow.summary in tfring/_api/exports.py
