"""Every rank's ``fit`` must run the same number of steps: checked before the first step.

With ``DistributedOptimizer`` each training step is one set of collectives, so ranks whose
shards give different step counts pair the wrong steps (rank 1 "finishes" its epochs with
rank 0's steps, then rank 0 waits for a partner that never comes). ``hvd.join()`` serves
custom loops, not ``fit`` (Keras runs its own loop); instead, when ``fit`` starts on a model trained with a tfring optimizer in
a job of more than one rank, the ranks compare their ``steps`` per epoch and ``epochs``
(one small allgather) and, if any differ, every rank raises the same ``ValueError`` naming
each rank's counts and the fix, before any step runs.

Steps that Keras cannot count in advance (a dataset of unknown cardinality, a generator
without ``steps_per_epoch``) are not compared; pass ``steps_per_epoch`` for those.
Thread-safety: a callback instance belongs to one ``fit``.
"""

import keras
import numpy as np


class StepCountAgreement(keras.callbacks.Callback):
    """Raises ``ValueError`` at ``on_train_begin`` when ranks disagree on steps or epochs."""

    def on_train_begin(self, logs=None):
        from tfring._basics import auto_names, ops

        steps = self.params.get("steps")
        epochs = self.params.get("epochs")
        mine = np.array([[-1 if steps is None else int(steps), int(epochs or 0)]], np.int64)
        every = ops.allgather(mine, name=auto_names.next_name("tfring.keras.fit.steps"))
        if (every == every[0]).all() or (every[:, 0] < 0).any():
            return
        counts = ", ".join(f"rank {r}: {s} steps x {e} epochs" for r, (s, e) in enumerate(every.tolist()))
        raise ValueError(
            f"fit() would run a different number of training steps on each rank ({counts}). With "
            "DistributedOptimizer every step is a collective over all ranks, so every rank must run the same "
            "number: give every rank a shard of the same size (x[:n - n % size][rank::size]), or pass the same "
            "steps_per_epoch (the smallest) and epochs to fit() on every rank. (A custom training loop can run "
            "uneven shards with hvd.join() instead.)"
        )


def with_check(callbacks):
    """``callbacks`` (a list, None, or Keras' ``CallbackList``, left as it is) with the check
    first."""
    if isinstance(callbacks, keras.callbacks.CallbackList):
        return callbacks
    return [StepCountAgreement(), *(callbacks or [])]


def needs_check(model):
    """True for a model trained with a tfring optimizer in a job of more than one rank."""
    from tfring._basics import basics
    from tfring._keras.optimizer_mark import is_distributed

    return basics.is_initialized() and basics.size() > 1 and is_distributed(getattr(model, "optimizer", None))
