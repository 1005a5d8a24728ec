"""A ``LossScaleOptimizer`` whose finite-gradient check is agreed across ranks.

Keras' ``LossScaleOptimizer`` checks this rank's gradients for inf/NaN and takes one of two
branches: apply (which reduces gradients across ranks) or skip and halve the loss scale.
When only some ranks overflow, ranks take different branches: some wait in an allreduce the
others never start, and the job hangs. Here every rank contributes its local verdict to a
``Min`` allreduce before the branch, so all ranks skip together (the averaged gradient
would not have been finite anyway) and their loss scales stay equal.

``tfring.keras.DistributedOptimizer`` returns one of these under the ``mixed_float16``
global policy, and converts Keras' own around a tfring optimizer (see ``jit.py``). It
serializes as ``keras.optimizers.LossScaleOptimizer``.
"""

import keras
import tensorflow as tf

from tfring._basics.ops import Min
from tfring._keras.serialization import register_serialization_alias
from tfring._tensorflow import (
    gradients,  # noqa: F401 - registers the ops' gradients
    mpi_ops,
)


class LossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """Keras' ``LossScaleOptimizer`` with the finite check agreed across ranks (one scalar
    ``Min`` allreduce per step). Must be used on every rank. Arguments as Keras'
    (``inner_optimizer``, ``initial_scale``, ``dynamic_growth_steps``, ``name``); the inner
    optimizer is normally a ``tfring.keras.DistributedOptimizer``.
    """

    def check_finite(self, grads):
        local = super().check_finite(grads)
        verdict = mpi_ops.allreduce(
            tf.cast(local, tf.float32), op=Min, name=f"tfring.LossScaleOptimizer.{self.name}.finite"
        )
        return verdict > 0.5

    def register_local_var(self, var):
        """Registers ``var`` as local on the inner (distributed) optimizer."""
        self.inner_optimizer.register_local_var(var)


register_serialization_alias(LossScaleOptimizer, keras.optimizers.LossScaleOptimizer)
