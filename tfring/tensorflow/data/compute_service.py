"""Horovod's tf.data compute service API (``horovod.tensorflow.data.compute_service``) on
TensorFlow's ``tf.data.experimental.service``: ``TfDataServiceConfig``, ``tf_data_service``,
``send_to_data_service``, ``compute_worker_fn``. Importing it adds
``tf.data.Dataset.send_to_data_service``, as Horovod's does.

    tfringrun -np 2 python -m tfring.tensorflow.data.compute_worker /shared/compute.json

docs/migrating.md has the whole recipe. A face: the implementation is
tfring/_tensorflow/data/compute_service.py.
"""

from tfring._api.binding import bind as _bind

__getattr__, __dir__ = _bind(globals())  # the names of tfring.tensorflow.data.compute_service in tfring/_api/exports.py
