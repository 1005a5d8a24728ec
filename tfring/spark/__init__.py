"""tfring on Apache Spark: ``tfring.spark.run(fn, num_proc=N)`` runs fn as N tfring ranks in
one barrier stage (``horovod.spark.run``); ``TfringRunner`` has Databricks' HorovodRunner
shape. Needs pyspark and Java on the driver and the executors; docs/engines.md ("Spark").

Modules: driver (run: slots, store, stage, results, why a stage failed), task (one rank
per barrier task), horovod_runner (TfringRunner), compute_worker (the tf.data service's
compute job on the executors: ``python -m tfring.spark.compute_worker CONFIG``).
"""

from tfring.runner.function_job import RankError
from tfring.spark.driver import run
from tfring.spark.horovod_runner import TfringRunner

__all__ = ["RankError", "TfringRunner", "run"]
