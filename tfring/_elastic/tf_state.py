"""Elastic training for TensorFlow: Horovod's ``horovod.tensorflow.elastic``, public as
``tfring.tensorflow.elastic`` (``hvd.elastic``), whose names tfring/_api/exports.py binds.

    import tfring.tensorflow as hvd
    hvd.init()
    state = hvd.elastic.TensorFlowKerasState(model, optimizer, epoch=0, batch=0)

    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            for state.batch in range(state.batch, batches_per_epoch):
                train_step(...)
                if state.batch % 10 == 0:
                    state.commit()
            state.batch = 0
    train(state)

Started by ``tfringrun --min-np N --max-np M ...``, a worker that loses a peer restores the
last commit, joins the job's next membership and goes on; a new worker starts from the
synced state. Functions traced with ``tf.function`` inside ``train`` should be created
there (or retraced after a reset) when they depend on the world size. docs/elastic.md.
"""

import tensorflow as tf

from tfring._basics import basics
from tfring._elastic import worker
from tfring._elastic.run import reset, run_fn
from tfring._elastic.state import ObjectState as _ObjectStateBase
from tfring._tensorflow.functions import broadcast_object, broadcast_variables

generation = worker.joined_generation  # hvd.elastic.generation(): the generation this process joined last


def run(func):
    """Decorator: runs ``func(state, ...)`` in the elastic loop (``tfring._elastic.run``):
    syncs ``state`` from rank 0 first; on a lost member restores the last commit, re-forms
    the job and calls ``func`` again; on ``HostsUpdatedInterrupt`` re-forms and calls again.
    Returns what ``func`` returns once it returns."""
    return run_fn(func, reset)


def _bcast(obj):
    return broadcast_object(obj, root_rank=0)


class ObjectState(_ObjectStateBase):
    """State of picklable Python values (keyword arguments, exposed as attributes)."""

    def __init__(self, **kwargs):
        super().__init__(bcast_object=_bcast, get_rank=basics.rank, **kwargs)


class TensorFlowState(ObjectState):
    """State of TF (or Keras 3) variables plus picklable values.

    Args:
      variables: the variables to track, in the same order on every rank (in a
        ``tf.compat.v1`` graph, default: every global variable).
      **kwargs: picklable values exposed as attributes (``epoch=0, batch=0``).
    """

    def __init__(self, variables=None, **kwargs):
        if variables is None:
            if tf.executing_eagerly():
                raise ValueError("TensorFlowState needs variables= in eager mode (e.g. model.variables). "
                                 "Received: variables=None")
            variables = tf.compat.v1.global_variables()
        self._tracked = list(variables)
        self._values = None
        super().__init__(**kwargs)
        self._save_variables()

    def _variables(self):
        return self._tracked

    def _save_variables(self):
        self._values = [v.numpy() for v in self._variables()]

    def save(self):
        self._save_variables()
        super().save()

    def restore(self):
        for v, value in zip(self._variables(), self._values):
            v.assign(value)
        super().restore()

    def sync(self):
        variables = self._variables()
        if variables and basics.size() > 1:
            broadcast_variables(variables, root_rank=0)
        self._save_variables()
        super().sync()


class TensorFlowKerasState(TensorFlowState):
    """State of a Keras model, its optimizer (slots and iteration count) and picklable
    values. After every reset the model's compiled train/test/predict functions are
    dropped, so ``fit`` traces them again for the new world size.

    Args:
      model: a built Keras model.
      optimizer: default ``model.optimizer``; built here if it is not yet.
      **kwargs: picklable values exposed as attributes (``epoch=0, batch=0``).
    """

    def __init__(self, model, optimizer=None, backward_passes_per_step=1, **kwargs):
        if not getattr(model, "built", False):
            raise ValueError("TensorFlowKerasState needs a built model (its variables are the state): give it a "
                             "keras.Input, or call model.build(input_shape), before creating the state. "
                             f"Received: an unbuilt {type(model).__name__}")
        self.model = model
        self.optimizer = optimizer if optimizer is not None else getattr(model, "optimizer", None)
        self.backward_passes_per_step = backward_passes_per_step
        super().__init__(variables=[], **kwargs)

    def _variables(self):
        variables = list(self.model.variables)
        opt = self.optimizer
        if opt is not None:
            if not opt.built:
                opt.build(self.model.trainable_variables)
            variables += list(opt.variables)
            # DistributedOptimizer(backward_passes_per_step=N): the local sums and their
            # counter are state too (a restore must drop uncommitted sums; a new worker must
            # count like the others).
            accumulator = getattr(opt, "_tfring_accumulator", None)
            if accumulator is not None and accumulator.built:
                variables += [accumulator.counter, *accumulator.slots]
        return variables

    def on_reset(self):
        from tfring._keras.model_preparation import drop_compiled_functions

        drop_compiled_functions(self.model)  # traced with the former job's collectives
        super().on_reset()

