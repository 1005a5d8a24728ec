"""``tfring.distribute``: ``RingStrategy``, a ``tf.distribute.Strategy`` on tfring's collectives.

``tfring.RingStrategy`` is the same class (imported lazily, so ``import tfring`` needs no
TensorFlow). See ``docs/strategy.md``.
"""

from tfring._private_api import PrivateApiError
from tfring.distribute.strategy import RingStrategy

__all__ = ["PrivateApiError", "RingStrategy"]
