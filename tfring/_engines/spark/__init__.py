"""tfring on Apache Spark, the implementation of ``tfring.spark`` (private).

Modules: driver (run: slots, store, stage, results, why a stage failed), task (one rank
per barrier task), horovod_runner (TfringRunner), compute_worker (the tf.data service's
compute job on the executors: ``python -m tfring.spark.compute_worker CONFIG``).
"""
