"""Horovod-compatible TensorFlow API of tfring: ``import tfring.tensorflow as hvd``.

Collectives are asynchronous TF ops (eager and ``tf.function``/``tf.compat.v1`` graphs,
CPU tensors) with gradients; see docs/tensorflow.md for names, errors, XLA and TF1.
"""

from tfring._api.binding import bind as _bind
from tfring._tensorflow import gradients as _gradients  # noqa: F401 - registers the gradients

__getattr__, __dir__ = _bind(globals())  # the names of tfring.tensorflow in tfring/_api/exports.py
