"""Model and optimizer state as one buffer, broadcast from one rank to all.

Used by ``BroadcastGlobalVariablesCallback`` and ``BackupAndRestore``. Runs eagerly in the
callback's Python thread through ``tfring.broadcast`` on NumPy arrays: every variable's bytes
are packed into one ``uint8`` buffer (any dtype, bfloat16 included), so the whole state
moves in a single collective. Blocking; every rank must call it with the same structure
(a different total size fails with ``tfring.errors.MismatchError`` naming the variables that
differ, ``state_mismatch.py``).
"""

import numpy as np

from tfring import _errors as errors
from tfring._basics import basics, ops


def _is_rng_state(variable):
    # Keras SeedGenerator states (dropout, noise): each rank keeps its own randomness.
    return "seed_generator_state" in str(getattr(variable, "path", getattr(variable, "name", "")))


def build_optimizer(model):
    """Creates the optimizer's variables when Keras has not yet (no strategy: at the first
    step). Needs a built model; returns False when it cannot build."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None or optimizer.built:
        return True
    if not model.built:
        return False
    optimizer.build(model.trainable_variables)
    return True


def state_variables(model, include_optimizer=True):
    """The model's variables (trainable and not, RNG states excluded), then the optimizer's
    if built."""
    variables = [v for v in model.variables if not _is_rng_state(v)]
    optimizer = getattr(model, "optimizer", None)
    if include_optimizer and optimizer is not None and optimizer.built:
        variables += list(optimizer.variables)
    return variables


def broadcast_as_one_buffer(variables, root_rank, name):
    """Assigns ``root_rank``'s values of ``variables`` on every other rank in ONE collective
    on host memory (their bytes packed together, any dtype). Eager, for callbacks; not
    ``tfring.tensorflow.broadcast_variables``, which runs TF ops (one per dtype, on the
    variables' device, in graphs too)."""
    if basics.size() == 1:
        return
    arrays = [np.array(v.numpy(), order="C", copy=True) for v in variables]  # keeps 0-d shapes
    flat = [a.reshape(-1).view(np.uint8) for a in arrays]
    buffer = np.concatenate(flat) if flat else np.zeros((0,), np.uint8)
    received = ops.broadcast(buffer, root_rank, name=name)
    if basics.rank() == root_rank:
        return
    offset = 0
    for variable, array in zip(variables, arrays):
        nbytes = array.nbytes
        value = received[offset : offset + nbytes].view(array.dtype).reshape(array.shape)
        variable.assign(value)
        offset += nbytes


def broadcast_model_state(model, root_rank, name="tfring.keras.broadcast_model_state", exclude=()):
    """Broadcasts the model's and (built) optimizer's variables from ``root_rank``, except
    those ``in exclude`` (a rank's local variables).

    Raises:
      tfring.errors.MismatchError: the ranks' variables differ; the message names the
        variables that differ and the likely fix (state_mismatch.py).
    """
    variables = [v for v in state_variables(model) if v not in exclude]
    try:
        broadcast_as_one_buffer(variables, root_rank, name)
    except errors.MismatchError as e:
        from tfring._keras import state_mismatch

        raise state_mismatch.explained(e, model, variables, root_rank, name) from e
