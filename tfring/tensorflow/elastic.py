"""Elastic training for TensorFlow: Horovod's ``horovod.tensorflow.elastic`` (``hvd.elastic``).

    import tfring.tensorflow as hvd
    hvd.init()
    state = hvd.elastic.TensorFlowKerasState(model, optimizer, epoch=0, batch=0)

    @hvd.elastic.run
    def train(state): ...

Implemented in tfring/_elastic/ (tf_state.py); docs/elastic.md has the user's view.
"""

from tfring._api.binding import bind as _bind

__getattr__, __dir__ = _bind(globals())  # the names of tfring.tensorflow.elastic in tfring/_api/exports.py
