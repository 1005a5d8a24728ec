"""tf.data helpers: the tf.data compute service (``compute_service``, ``compute_worker``),
Horovod's ``horovod.tensorflow.data`` API on TensorFlow's tf.data service."""
