"""Loads tfring's TF op library exactly once per process, and tells tf.function how to
order its ops.

The library is ``libtfring_tf_ops.so`` next to ``libtfring_core.so`` in the ``tfring``
package directory (it links the core through ``$ORIGIN``, so the kernels and
``tfring._core`` share one runtime). Loading a second copy from another path would make
TensorFlow fail with "Multiple OpKernel registrations", so only this path is ever used.

Ordering inside tf.function: the ops are stateful (never constant-folded, merged or
pruned), and tf.function's automatic control dependencies would run stateful ops one after
another in program order: N collectives in a step would then negotiate one at a time and
could never fuse. They are order-insensitive (rank 0 matches them by name, in any order),
so the data collectives are registered like TPU infeeds as "must run, order-insensitive"
ops: they always run and run concurrently. ``TfringBarrier`` keeps program order. This uses
a private TF list (checked for TF 2.21); without it the ops are merely serialized.
"""

import os
import threading

import tensorflow as tf

from tfring import _core, _private_api
from tfring._basics import gpu

UNORDERED_OPS = frozenset((
    "TfringAllreduce",
    "TfringGroupedAllreduce",
    "TfringAllgather",
    "TfringBroadcast",
    "TfringAlltoall",
    "TfringReducescatter",
))

_lock = threading.Lock()
_library = None


def op_library():
    """The loaded op library module (``tf.load_op_library`` result); loads it on first use."""
    global _library
    with _lock:
        if _library is None:
            path = os.path.join(os.path.dirname(os.path.abspath(_core.__file__)), "libtfring_tf_ops.so")
            if not os.path.exists(path):
                raise ImportError(
                    f"tfring's TensorFlow op library is missing: {path}. It is built only when "
                    "TensorFlow is importable at build time: install tensorflow first, then rebuild "
                    "tfring (pip install --no-build-isolation -e . or python setup.py build_ext "
                    "--inplace)."
                )
            _library = tf.load_op_library(path)
            gpu.load_tf_gpu_kernels(tf)  # the GPU kernels of the same ops, when TF sees a GPU
            _register_unordered_ops()
        return _library


def _register_unordered_ops():
    try:
        acd = _private_api.auto_control_deps
        current = acd.MUST_RUN_ORDER_INSENSITIVE_STATEFUL_OPS
        acd.MUST_RUN_ORDER_INSENSITIVE_STATEFUL_OPS = frozenset(current) | UNORDERED_OPS
    except (_private_api.PrivateApiError, AttributeError, TypeError):  # pragma: no cover - private API moved
        pass


def ops_are_unordered():
    """True when tf.function runs tfring's data collectives concurrently (see above)."""
    try:
        return UNORDERED_OPS <= _private_api.auto_control_deps.MUST_RUN_ORDER_INSENSITIVE_STATEFUL_OPS
    except (_private_api.PrivateApiError, AttributeError):  # pragma: no cover
        return False
