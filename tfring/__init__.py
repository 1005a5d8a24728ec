"""tfring: ring-allreduce data-parallel training for TensorFlow 2 and Keras 3.

This top-level package needs no TensorFlow: it holds the process basics and collectives on
NumPy arrays. TensorFlow users import ``tfring.tensorflow`` or ``tfring.keras``.
"""

from tfring._api.binding import bind as _bind

__getattr__, __dir__ = _bind(globals())  # the names of tfring in tfring/_api/exports.py
