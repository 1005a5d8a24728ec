"""``BroadcastGlobalVariablesCallback``: every rank starts from the root rank's state."""

import keras

from tfring._keras import model_preparation, state
from tfring._tensorflow.local_sources import LocalSources


class BroadcastGlobalVariablesCallback(keras.callbacks.Callback):
    """Broadcasts the model's variables and the optimizer's state from ``root_rank`` to
    every other rank when training starts, so that all ranks start from the same point
    (random initialization or a checkpoint loaded on ``root_rank`` only).

    Must run on every rank. The optimizer is built first when Keras has not built it yet; a
    model that is not built when training starts (subclassed, no input shape) is broadcast
    after the first batch instead, as Horovod does. Broadcasts once per callback object.

    Args:
      root_rank: the rank whose state wins.
      device: accepted for Horovod compatibility; ignored.
      local_variables: model variables each rank keeps as they are (Horovod's local
        variables, e.g. a ``PartialDistributedOptimizer``'s local layers' weights). Their
        optimizer slots are broadcast with the rest of the optimizer's state.

    Example:
      ``model.fit(..., callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])``
    """

    def __init__(self, root_rank, device="", local_variables=None):
        super().__init__()
        self.root_rank = root_rank
        self.broadcast_done = False
        self.local_variables = LocalSources()
        for variable in local_variables or []:
            self.local_variables.add(variable)
        del device

    def set_model(self, model):
        super().set_model(model)
        model_preparation.prepare_model(model)

    def _broadcast(self):
        state.broadcast_model_state(self.model, self.root_rank, exclude=self.local_variables)
        self.broadcast_done = True

    def on_train_begin(self, logs=None):
        if self.broadcast_done:
            return
        if self.model.built and state.build_optimizer(self.model):
            self._broadcast()

    def on_train_batch_end(self, batch, logs=None):
        if not self.broadcast_done:
            self._broadcast()
