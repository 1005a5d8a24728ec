"""Exceptions raised by tfring's Python API, one per core error code.

Each class also derives from the closest Python built-in, so ``except ValueError`` and
``except TimeoutError`` keep working. ``tfring.tensorflow`` maps the same codes to
``tf.errors`` classes.
"""

import builtins


class TfringError(RuntimeError):
    """Base class of every tfring error. ``code`` is the core's ErrorCode name."""

    code = "UNKNOWN"


class InvalidArgumentError(TfringError, ValueError):
    """Bad argument on this rank: wrong split, root out of range, duplicate name, ..."""

    code = "INVALID_ARGUMENT"


class MismatchError(TfringError):
    """Ranks submitted the same tensor name with different dtype/shape/op/root."""

    code = "MISMATCH"


class PreconditionError(TfringError):
    """tfring is not initialized, already initialized, or shut down."""

    code = "FAILED_PRECONDITION"


class PeerLostError(TfringError, ConnectionError):
    """A peer process died or closed its connection; the job cannot continue."""

    code = "PEER_LOST"


class TimeoutError(TfringError, builtins.TimeoutError):
    """A wait exceeded its limit (TFRING_TIMEOUT_S, TFRING_STALL_SHUTDOWN_S, wait(timeout))."""

    code = "TIMEOUT"


class UnimplementedError(TfringError, NotImplementedError):
    """Unsupported dtype, reduce op or device."""

    code = "UNIMPLEMENTED"


class InternalError(TfringError):
    """A bug in tfring; please report it with the message."""

    code = "INTERNAL"


class AbortedError(TfringError):
    """The job is being torn down."""

    code = "ABORTED"


# Their public name: tracebacks, reprs and pickles say tfring.errors.TimeoutError (the face
# binds these very classes), as before the implementation moved here.
for _cls in (TfringError, InvalidArgumentError, MismatchError, PreconditionError, PeerLostError, TimeoutError,
             UnimplementedError, InternalError, AbortedError):
    _cls.__module__ = "tfring.errors"
del _cls


def _by_code():
    """{core ErrorCode value: exception class}, matched by the ``code`` names the core exports
    (``_core.error_codes()``), so no value is retyped here."""
    from tfring import _core

    classes = {cls.code: cls for cls in (InvalidArgumentError, MismatchError, PreconditionError, PeerLostError,
                                         TimeoutError, UnimplementedError, InternalError, AbortedError)}
    return {value: classes.get(name, InternalError) for name, value in _core.error_codes().items()}


_BY_CODE = _by_code()


def from_code(code, message):
    """Builds the exception for a core ErrorCode value (called by the C++ module)."""
    return _BY_CODE.get(code, InternalError)(message)
