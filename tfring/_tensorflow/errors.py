"""tfring error codes as ``tf.errors`` classes (the table in docs/core.md, "Errors").

The TF kernels map the core's codes to canonical status codes (``ToTfStatus`` in
cc/tf/kernel_common.cc, through ``CanonicalCode`` in cc/core/base/status.h); this module maps the
exceptions of tfring's NumPy API (used by ``broadcast_object`` / ``allgather_object``)
through the same core table (``_core.canonical_error_codes()``), so every collective of
``tfring.tensorflow`` raises the same ``tf.errors`` classes (tests/test_tf_tables.py pins it):

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

from tfring import _core, _errors


def _tf_error_classes():
    """{canonical status code: tf.errors class}, read from the classes themselves."""
    classes = (getattr(tf.errors, name) for name in dir(tf.errors))
    return {cls(None, None, "").error_code: cls for cls in classes
            if isinstance(cls, type) and issubclass(cls, tf.errors.OpError) and cls is not tf.errors.OpError}


def _tf_error_for():
    """{tfring._errors class: tf.errors class} through the core's canonical codes, the table
    the TF kernels map with; a code without a tf.errors class becomes InternalError."""
    by_code = _tf_error_classes()
    canonical = _core.canonical_error_codes()
    ours = (cls for cls in vars(_errors).values()
            if isinstance(cls, type) and issubclass(cls, _errors.TfringError) and cls is not _errors.TfringError)
    return {cls: by_code.get(canonical.get(cls.code), tf.errors.InternalError) for cls in ours}


TF_ERROR_FOR = _tf_error_for()


def to_tf_error(exc):
    """The ``tf.errors`` exception for a ``tfring._errors`` exception."""
    cls = next((TF_ERROR_FOR[k] for k in type(exc).__mro__ if k in TF_ERROR_FOR), tf.errors.InternalError)
    return cls(None, None, str(exc))


@contextlib.contextmanager
def as_tf_errors():
    """Re-raises ``tfring._errors`` exceptions as the matching ``tf.errors`` class."""
    try:
        yield
    except _errors.TfringError as exc:
        raise to_tf_error(exc) from exc
