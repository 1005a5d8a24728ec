"""The engines (private): what runs a tfring job on something other than ``tfringrun``'s own
processes, above the launcher and elastic layers (tests/test_python_layers.py).

  spark/         ``tfring.spark``: run(fn) in a barrier stage, TfringRunner, the data
                 service's compute job on the executors
  ray/           ``tfring.ray``: TfringTrainer (Ray Train) and RayExecutor (actors)
  data_service/  the tf.data compute service's launcher side: the registry of
                 dispatchers and workers (``python -m tfring.tensorflow.data.compute_worker``)
"""
