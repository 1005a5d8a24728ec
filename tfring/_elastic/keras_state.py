"""Elastic training with Keras ``fit``: Horovod's ``horovod.keras.elastic``, public as
``tfring.keras.elastic`` (``hvd.elastic``), whose names tfring/_api/exports.py binds.

The usage is in the face's docstring (tfring/keras/elastic.py).

After a reset ``fit`` starts again at ``state.epoch`` from the weights of the last commit.
Keras 3 cannot shorten an epoch from a callback, so an epoch interrupted after a mid-epoch
commit runs all its steps again from that commit (``state.batch`` says where the commit
was). docs/elastic.md.
"""

import keras

from tfring._elastic.tf_state import TensorFlowKerasState


class KerasState(TensorFlowKerasState):
    """State of a Keras model, its optimizer and picklable values (``epoch=0, batch=0``).
    See ``tfring.tensorflow.elastic.TensorFlowKerasState`` (tf_state.py)."""


class CommitStateCallback(keras.callbacks.Callback):
    """Commits ``state`` every ``batches_per_commit`` batches and at the end of each epoch.
    Put it after the Update*StateCallbacks, so a commit holds their counters."""

    def __init__(self, state, batches_per_commit=1):
        super().__init__()
        if int(batches_per_commit) < 1:
            raise ValueError(f"batches_per_commit must be a positive integer. Received: {batches_per_commit!r}")
        self.state = state
        self.batches_per_commit = int(batches_per_commit)
        self._left = self.batches_per_commit

    def on_train_begin(self, logs=None):
        self._left = self.batches_per_commit  # equal on every rank after each reset

    def on_train_batch_end(self, batch, logs=None):
        self._left -= 1
        if self._left == 0:
            self.state.commit()
            self._left = self.batches_per_commit

    def on_epoch_end(self, epoch, logs=None):
        self.state.commit()


class UpdateBatchStateCallback(keras.callbacks.Callback):
    """Keeps ``state.batch`` at the index of the last finished batch of the epoch (0 again
    at each epoch's end), as Horovod does."""

    def __init__(self, state):
        super().__init__()
        self.state = state

    def on_train_batch_end(self, batch, logs=None):
        self.state.batch = batch

    def on_epoch_end(self, epoch, logs=None):
        self.state.batch = 0


class UpdateEpochStateCallback(keras.callbacks.Callback):
    """Keeps ``state.epoch`` at the number of finished epochs across resets: ``fit`` counts
    its epochs from 0 on each call, so call it with ``epochs=total - state.epoch``."""

    def __init__(self, state):
        super().__init__()
        self.state = state
        self.initial_epoch = state.epoch

    def on_train_begin(self, logs=None):
        self.initial_epoch = self.state.epoch

    def on_epoch_end(self, epoch, logs=None):
        self.state.epoch = self.initial_epoch + epoch + 1

