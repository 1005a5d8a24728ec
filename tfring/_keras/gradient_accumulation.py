"""Local gradient accumulation for ``backward_passes_per_step`` (Horovod semantics).

Each of the first ``passes - 1`` calls adds this rank's gradients to local accumulators and
only counts the optimizer's iteration; the ``passes``-th call reduces the accumulated sums
across ranks (divided by ``passes`` first when ``average``) and applies them. Every rank
takes the same branch at the same step, since the counter advances in lockstep: every
process must run the same number of steps (as always with tfring).

The accumulators are plain ``tf.Variable``s owned by this object, not optimizer variables:
a saved model has exactly the wrapped optimizer's variables, and a checkpoint taken between
two applying steps drops the partial sums (checkpoints at epoch ends lose nothing when the
steps per epoch are a multiple of ``passes``).
"""

import tensorflow as tf


def _dense(gradient):
    if isinstance(gradient, tf.IndexedSlices):
        return tf.convert_to_tensor(gradient)
    return gradient


class LocalGradientAccumulator:
    """Accumulators for one optimizer. Not thread-safe (one training step at a time)."""

    def __init__(self, passes, average):
        if not isinstance(passes, int) or passes < 1:
            raise ValueError(f"backward_passes_per_step must be an integer >= 1. Received: {passes!r}")
        self.passes = passes
        self.average = bool(average)
        self.counter = None
        self.slots = []

    @property
    def built(self):
        return self.counter is not None

    def build(self, variables):
        """Creates one zero accumulator per variable (outside any tf.function)."""
        with tf.init_scope():
            self.counter = tf.Variable(0, dtype=tf.int64, trainable=False, name="tfring_accumulation_counter")
            self.slots = [
                tf.Variable(tf.zeros(v.shape, dtype=v.dtype), trainable=False, name="tfring_accumulator")
                for v in variables
            ]

    def apply(self, gradients, slot_indices, apply_fn, count_iteration_fn):
        """Accumulates ``gradients`` (aligned with ``slot_indices``); on every ``passes``-th
        call runs ``apply_fn(summed_gradients)`` and resets, otherwise runs
        ``count_iteration_fn()``. ``None`` gradients stay ``None``."""
        sums = []
        for g, i in zip(gradients, slot_indices):
            if g is None:
                sums.append(None)
            else:
                slot = self.slots[i]
                sums.append(slot + tf.cast(_dense(g), slot.dtype))
        count = self.counter + 1

        def flush():
            summed = sums
            if self.average:
                summed = [None if s is None else s / tf.cast(self.passes, s.dtype) for s in sums]
            apply_fn(summed)
            for s, i in zip(sums, slot_indices):
                if s is not None:
                    self.slots[i].assign(tf.zeros_like(s))
            self.counter.assign(0)

        def accumulate():
            for s, i in zip(sums, slot_indices):
                if s is not None:
                    self.slots[i].assign(s)
            self.counter.assign(count)
            count_iteration_fn()

        tf.cond(count >= self.passes, flush, accumulate)
