"""tfring error codes as ``tf.errors`` classes (ARCHITECTURE.md section 3).

The TF kernels map the core's codes themselves (cc/tf/kernel_common.cc); this module maps
the exceptions of tfring's NumPy API (used by ``broadcast_object`` / ``allgather_object``)
the same way, so every collective of ``tfring.tensorflow`` raises ``tf.errors`` classes:

=====================  ================================
core code              tf.errors class
=====================  ================================
INVALID_ARGUMENT       InvalidArgumentError
MISMATCH               FailedPreconditionError
FAILED_PRECONDITION    FailedPreconditionError
PEER_LOST              UnavailableError
TIMEOUT                DeadlineExceededError
UNIMPLEMENTED          UnimplementedError
INTERNAL               InternalError
ABORTED                AbortedError
=====================  ================================
"""

import contextlib

import tensorflow as tf

from tfring import errors as _errors

TF_ERROR_FOR = {
    _errors.InvalidArgumentError: tf.errors.InvalidArgumentError,
    _errors.MismatchError: tf.errors.FailedPreconditionError,
    _errors.PreconditionError: tf.errors.FailedPreconditionError,
    _errors.PeerLostError: tf.errors.UnavailableError,
    _errors.TimeoutError: tf.errors.DeadlineExceededError,
    _errors.UnimplementedError: tf.errors.UnimplementedError,
    _errors.InternalError: tf.errors.InternalError,
    _errors.AbortedError: tf.errors.AbortedError,
}


def to_tf_error(exc):
    """The ``tf.errors`` exception for a ``tfring.errors`` exception."""
    cls = next((TF_ERROR_FOR[k] for k in type(exc).__mro__ if k in TF_ERROR_FOR), tf.errors.InternalError)
    return cls(None, None, str(exc))


@contextlib.contextmanager
def as_tf_errors():
    """Re-raises ``tfring.errors`` exceptions as the matching ``tf.errors`` class."""
    try:
        yield
    except _errors.TfringError as exc:
        raise to_tf_error(exc) from exc
