"""The tf.data compute service's launcher side (private): ``compute_worker`` starts the
dispatchers and workers of a compute job and publishes their addresses. The training side
(``TfDataServiceConfig``, ``send_to_data_service``) is tfring/_tensorflow/data/.
"""
