"""GPU helpers: pin this process to its GPU, load the TF GPU kernels, report GPU support.

Re-exported as ``tfring.tensorflow.pin_gpu`` and ``tfring.keras.pin_gpu``. Nothing here
imports TensorFlow until a function that needs it is called, and everything is a no-op
(or says why not) on machines without GPUs.

Example::

    import tfring.keras as hvd
    hvd.init()
    hvd.pin_gpu()          # before building any model or tensor
"""

import os
import warnings

from tfring import _core

GPU_KERNEL_LIBRARY = "libtfring_tf_gpu_ops.so"


def pin_gpu(local_rank=None, memory_growth=True):
    """Makes only the GPU of this process's ``local_rank`` visible to TensorFlow.

    What every Horovod script does by hand: with several processes per host, process
    ``local_rank`` uses GPU ``local_rank``, and TF allocates memory as needed instead of
    grabbing every GPU's memory at start. Call it right after ``init()`` and before
    TensorFlow touches a GPU (before creating tensors, models or datasets).

    Args:
      local_rank: the GPU index to keep. Default: ``tfring.local_rank()`` once initialized,
        else ``TFRING_LOCAL_RANK`` (set by ``tfringrun``), else 0. When exactly one GPU is
        visible (a scheduler already set ``CUDA_VISIBLE_DEVICES`` per process) that GPU is
        kept whatever the local rank.
      memory_growth: enable ``tf.config.experimental.set_memory_growth`` on the kept GPU.

    Returns:
      The kept ``tf.config.PhysicalDevice``, or ``None`` when TensorFlow sees no GPU.

    Raises:
      ValueError: more processes on this host than visible GPUs.
      RuntimeError: TensorFlow already initialized its GPUs with a different choice.
    """
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        return None
    if local_rank is None:
        local_rank = _default_local_rank()
    local_rank = int(local_rank)
    if len(gpus) == 1:
        gpu = gpus[0]
    elif 0 <= local_rank < len(gpus):
        gpu = gpus[local_rank]
    else:
        raise ValueError(
            f"pin_gpu: this host shows {len(gpus)} GPUs but this process has local_rank {local_rank}; "
            f"run at most {len(gpus)} processes per host (tfringrun -H host:{len(gpus)}) or give each "
            f"process its own CUDA_VISIBLE_DEVICES. Received: local_rank={local_rank}"
        )
    try:
        if memory_growth:
            tf.config.experimental.set_memory_growth(gpu, True)
        tf.config.set_visible_devices([gpu], "GPU")
    except RuntimeError as e:  # TF's GPUs are already initialized
        if tf.config.get_visible_devices("GPU") == [gpu]:
            return gpu  # already pinned the same way: calling twice is fine
        raise RuntimeError(
            "pin_gpu() must run before TensorFlow uses a GPU (call it right after init(), before "
            f"creating tensors or models); TensorFlow said: {e}"
        ) from e
    return gpu


def _default_local_rank():
    if _core.is_initialized():
        return _core.local_rank()
    return int(os.environ.get("TFRING_LOCAL_RANK", "0") or 0)


def load_tf_gpu_kernels(tf_module=None):
    """Loads tfring's TF GPU kernels when TensorFlow sees a GPU; returns the loaded library
    or ``None`` (no GPU, or tfring was built without them: then a warning says so and GPU
    tensors are copied to the host by TensorFlow's placer).

    ``tfring.tensorflow`` calls this once, right after loading its CPU op library (the GPU
    kernels belong to the ops defined there).
    """
    tf = tf_module
    if tf is None:
        import tensorflow as tf
    if not tf.config.list_physical_devices("GPU"):
        return None
    path = os.path.join(os.path.dirname(os.path.abspath(_core.__file__)), GPU_KERNEL_LIBRARY)
    if not os.path.exists(path):
        warnings.warn(
            f"TensorFlow sees a GPU but tfring has no GPU kernels ({GPU_KERNEL_LIBRARY} is missing): "
            "collectives on GPU tensors will run on the CPU after a copy. Rebuild tfring with "
            "TFRING_WITH_NCCL=1 (see docs/gpu.md).",
            stacklevel=2,
        )
        return None
    return tf.load_op_library(path)


def gpu_info():
    """Whether collectives on GPU tensors can run in this process.

    Returns a dict: ``built`` (the NCCL backend is compiled in), ``available`` (NCCL, the
    CUDA runtime and a GPU were found now) and ``detail`` (versions and paths, or what is
    missing and how to get it). Loads the GPU libraries on first call.
    """
    return _core.gpu_info()
