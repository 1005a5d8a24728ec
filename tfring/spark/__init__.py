"""tfring on Apache Spark: ``tfring.spark.run(fn, num_proc=N)`` runs fn as N tfring ranks in
one barrier stage (``horovod.spark.run``); ``TfringRunner`` has Databricks' HorovodRunner
shape. Needs pyspark and Java on the driver and the executors; docs/engines.md ("Spark").

A face: the implementation is tfring/_engines/spark/ (``python -m tfring.spark.compute_worker CONFIG`` runs the tf.data service's compute job
on the executors).
"""

from tfring._api.binding import bind as _bind

__getattr__, __dir__ = _bind(globals())  # the names of tfring.spark in tfring/_api/exports.py
