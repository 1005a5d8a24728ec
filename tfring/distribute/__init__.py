"""``tfring.distribute``: ``RingStrategy``, a ``tf.distribute.Strategy`` on tfring's collectives.

``tfring.RingStrategy`` is the same class (imported lazily, so ``import tfring`` needs no
TensorFlow). See ``docs/strategy.md``.
"""

from tfring._api.binding import bind as _bind

__getattr__, __dir__ = _bind(globals())  # the names of tfring.distribute in tfring/_api/exports.py
