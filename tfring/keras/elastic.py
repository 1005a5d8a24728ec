"""Elastic training with Keras ``fit``: Horovod's ``horovod.keras.elastic`` (``hvd.elastic``).

    state = hvd.elastic.KerasState(model, batch=0, epoch=0)
    callbacks = [hvd.elastic.UpdateEpochStateCallback(state),
                 hvd.elastic.UpdateBatchStateCallback(state),
                 hvd.elastic.CommitStateCallback(state, batches_per_commit=10)]

    @hvd.elastic.run
    def train(state):
        model.fit(data, steps_per_epoch=..., epochs=epochs - state.epoch, callbacks=callbacks)

Implemented in tfring/_elastic/ (keras_state.py, tf_state.py); docs/elastic.md.
"""

from tfring._api.binding import bind as _bind

__getattr__, __dir__ = _bind(globals())  # the names of tfring.keras.elastic in tfring/_api/exports.py
