"""The tf.data compute service's training side (private): ``compute_service`` (the config
and the datasets), ``compute_client`` (the dispatcher's client), ``compute_rank`` (a compute
job's rank and host). Faces: ``tfring.tensorflow.data.compute_service`` and
``tfring.tensorflow.data.compute_worker``.
"""
