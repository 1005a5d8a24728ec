"""Local (unsynchronized) variables: gradients that stay on their rank.

Horovod's ``register_local_source`` / ``register_local_var`` and the ``Partial...`` tape and
optimizer: a variable registered as local (for example a per-rank head or embedding) gets
its own rank's gradient, not the reduced one, and is left out of the reduction. With
``scale_local_gradients`` (the default, as in Horovod) that gradient is divided by the
number of ranks, so its step has the size the reduced (averaged) gradients' steps have.

This module only keeps the set and applies that division; ``grad_reduction.reduce_gradients``
(``local_sources=``) leaves the local gradients out of the reduction. Variables are keyed by
identity (Keras 3 variables have no ``.ref()``). Not thread-safe: register before training,
from one thread.
"""

import tensorflow as tf

from tfring._basics import basics


class LocalSources:
    """The set of local variables of one tape or optimizer."""

    def __init__(self):
        self._by_id = {}  # id(variable) -> variable (kept alive so ids stay unique)

    def add(self, variable):
        self._by_id[id(variable)] = variable

    def __contains__(self, variable):
        return id(variable) in self._by_id

    def __len__(self):
        return len(self._by_id)

    def shared_indices(self, variables):
        """The indices of the variables of ``variables`` that are not local."""
        return [i for i, v in enumerate(variables) if v not in self]

    def divide_local(self, grads, variables, process_set=None):
        """``grads[i]`` is the gradient of ``variables[i]``. Returns the list with the gradient
        of every local variable divided by the size (on a ``process_set``, by its size, or by
        1 on a rank outside it, whose other gradients are not reduced either)."""
        size = basics.size()
        if process_set is not None and process_set.process_set_id:
            size = process_set.size() if process_set.included() else 1
        out = list(grads)
        for i, v in enumerate(variables):
            if v in self and out[i] is not None:
                out[i] = _divide(out[i], size)
        return out


def _divide(grad, size):
    if isinstance(grad, tf.IndexedSlices):
        return tf.IndexedSlices(grad.values / tf.cast(size, grad.values.dtype), grad.indices, grad.dense_shape)
    return grad / tf.cast(size, grad.dtype)


def layer_variables(local_layers):
    """The trainable variables of ``local_layers`` (a Keras layer or a list of them; None:
    none). Raises ``ValueError`` for anything that is not a Keras layer."""
    import keras

    if local_layers is None:
        return []
    if isinstance(local_layers, keras.layers.Layer):
        local_layers = [local_layers]
    local_layers = list(local_layers)
    wrong = [type(layer).__name__ for layer in local_layers if not isinstance(layer, keras.layers.Layer)]
    if wrong:
        raise ValueError(f"local_layers must be Keras layers. Received: {', '.join(wrong)}")
    return [v for layer in local_layers for v in layer.trainable_weights]
