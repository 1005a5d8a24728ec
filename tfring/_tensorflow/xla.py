"""XLA and tfring's collectives: which ops compile, and the one trace-time error for those
that cannot.

tfring's data collectives (allreduce, grouped allreduce, broadcast, reducescatter,
allgather, alltoall) have XLA lowerings, registered by the op library
(``cc/tf/xla/``): inside ``tf.function(jit_compile=True)`` or a Keras model compiled with
``jit_compile=True`` each becomes a pair of XLA custom calls that submit to the same core
queue as the TF kernels (same negotiation, fusion, response cache and names) and wait for
the result further down the compiled program (docs/tensorflow.md, "XLA").

The custom calls have handlers for XLA:CPU (platform "Host", in the op library) and for
XLA:GPU (platform "CUDA", in tfring's GPU library, ``cc/tf_gpu/xla_cuda_handlers.cc``:
NCCL ordered against XLA's stream with CUDA events). Where TF sees a GPU, the lowerings
compile only when that library is loaded and its handlers registered
(``cuda_handler_status()`` is ""); otherwise ``lowered_here()`` is False, every tfring op
fails at trace time under XLA, and tfring.keras turns ``jit_compile`` off with one warning
saying why (``model_preparation``). ``join`` and ``barrier`` have no lowering at all.
``check_not_xla`` raises for both cases, naming the op and the fix, instead of XLA's later
"no registered kernel / implementation" message.
Auto-clustering (``tf.config.optimizer.set_jit(True)``) needs no check.

Verified on TF 2.21: ``GraphOrParentsInXlaContext(graph)`` (a private TF function, from
``tfring._private_api``) is True while tracing a ``jit_compile=True`` function (and its
cond/while bodies) and False otherwise.
"""

import tensorflow as tf

from tfring import _private_api

# The tfring.tensorflow ops with an XLA lowering (cc/tf/xla/xla_kernels.cc), by the kind
# naming.resolve gets.
LOWERED_KINDS = frozenset(("allreduce", "grouped_allreduce", "broadcast", "reducescatter", "allgather", "alltoall"))


class XlaCompilationError(tf.errors.UnimplementedError, ValueError):
    """A tfring op without an XLA lowering (``join``, ``barrier``; any op where TF sees a
    GPU but tfring's XLA CUDA handlers are not available) traced inside an XLA-compiled
    function. A ``tf.errors.UnimplementedError`` (what TF raises for an op with no kernel)
    and a ``ValueError``."""


_cuda_status = None


def cuda_handler_status():
    """"" when tfring's XLA:GPU custom-call handlers are registered in this process (its GPU
    library is loaded and registered them for platform "CUDA"); otherwise why not, as a
    sentence. Loads tfring's op libraries if needed; cached."""
    global _cuda_status
    if _cuda_status is None:
        import ctypes
        import os

        from tfring import _core
        from tfring._basics import gpu
        from tfring._tensorflow import _loader

        _loader.op_library()  # loads the GPU library too, where TF sees a GPU
        path = os.path.join(os.path.dirname(os.path.abspath(_core.__file__)), gpu.GPU_KERNEL_LIBRARY)
        if not os.path.exists(path):
            _cuda_status = (f"tfring was built without its GPU library ({gpu.GPU_KERNEL_LIBRARY}; rebuild with "
                            "TFRING_WITH_NCCL=1, docs/gpu.md), which holds the XLA CUDA handlers")
        else:
            try:
                registration = ctypes.CDLL(path).tfring_xla_cuda_registration
                registration.restype = ctypes.c_char_p
                _cuda_status = registration().decode()
            except (OSError, AttributeError) as e:
                _cuda_status = f"tfring's GPU library has no XLA CUDA handlers ({e})"
    return _cuda_status


def lowered_here():
    """True where tfring's XLA lowerings run: XLA:CPU (TF sees no GPU), or XLA:GPU once
    tfring's XLA CUDA handlers are registered (``cuda_handler_status()`` is "")."""
    if not _tf_sees_gpu():
        return True
    return cuda_handler_status() == ""


def _tf_sees_gpu():
    return bool(tf.config.list_logical_devices("GPU"))


def lowered(kind):
    """True when a tfring.tensorflow op of ``kind`` (as ``naming.resolve`` gets it, e.g.
    ``"allreduce"`` or ``"allreduce.ps1"``) compiles with XLA on this machine."""
    return kind.split(".", 1)[0] in LOWERED_KINDS and lowered_here()


def in_xla_context(graph=None):
    """True while tracing inside an XLA-compiled function (``jit_compile=True``); ``graph``:
    default, the current default graph. False eagerly, and if the private check is gone."""
    if graph is None:
        if tf.executing_eagerly():
            return False
        graph = tf.compat.v1.get_default_graph()
    try:
        return bool(_private_api.GraphOrParentsInXlaContext(graph))
    except Exception:  # noqa: BLE001 - a private API changing must not break every op
        return False


def check_not_xla(what, graph=None):
    """Raises ``XlaCompilationError`` naming ``what`` (e.g. ``"tfring.tensorflow.join"``)
    when ``graph`` (default: the current one) is being compiled by XLA."""
    if in_xla_context(graph):
        raise XlaCompilationError(
            None,
            None,
            f"{what} cannot run inside an XLA-compiled function (tf.function(jit_compile=True), or a "
            "Keras model compiled with jit_compile=True / 'auto' on a GPU): "
            + (f"it has no XLA lowering (only {', '.join(sorted(LOWERED_KINDS))} have)" if lowered_here() else
               f"TF sees a GPU here, and tfring's XLA CUDA handlers are not available: {cuda_handler_status()}")
            + ". Call it outside the compiled function, or turn XLA off for that function: "
            "tf.function(..., jit_compile=False) or model.compile(..., jit_compile=False).",
        )
