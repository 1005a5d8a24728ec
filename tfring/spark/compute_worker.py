"""The tf.data compute job on Spark executors (``horovod.spark.tensorflow.compute_worker``):

    python -m tfring.spark.compute_worker /shared/compute.json [--dispatchers 1] \\
        [--dispatcher-side compute|training] [--dispatchers-nic eth0] [--num-proc N] [--timeout 60]
    # or, as Horovod's, through spark-submit:
    spark-submit --master spark://host:7077 \\
        "$(python -c 'import tfring.spark.compute_worker as w; print(w.__file__)')" /shared/compute.json

A face and entry point: the implementation is tfring/_engines/spark/compute_worker.py
(docs/engines.md, "Spark").
"""

from tfring._api.binding import bind as _bind

__getattr__, __dir__ = _bind(globals())  # the names of tfring.spark.compute_worker in tfring/_api/exports.py

if __name__ == "__main__":
    # The ranks' function is pickled by reference to its private module, not from __main__.
    from tfring._engines.spark.compute_worker import main

    raise SystemExit(main())
