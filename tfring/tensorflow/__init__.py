"""Horovod-compatible TensorFlow API of tfring: ``import tfring.tensorflow as hvd``.

Collectives are asynchronous TF ops (eager and ``tf.function``/``tf.compat.v1`` graphs,
CPU tensors) with gradients; see docs/tensorflow.md for names, errors, XLA and TF1.
"""

from tfring.basics import (
    cross_rank,
    cross_size,
    init,
    is_homogeneous,
    is_initialized,
    local_rank,
    local_size,
    rank,
    shutdown,
    size,
    start_timeline,
    stop_timeline,
)
from tfring.capabilities import (
    ccl_built,
    cuda_built,
    ddl_built,
    gloo_built,
    gloo_enabled,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    rocm_built,
)
from tfring.process_sets import (
    ProcessSet,
    add_process_set,
    global_process_set,
    remove_process_set,
)
from tfring.tensorflow import elastic, summary  # elastic training; tfring's metrics as tf.summary scalars
from tfring.tensorflow import gradients as _gradients  # noqa: F401 - registers the gradients
from tfring.tensorflow.compression import Compression, Compressor, FP16Compressor, NoneCompressor
from tfring.tensorflow.functions import (
    allgather_object,
    broadcast_,
    broadcast_object,
    broadcast_object_fn,
    broadcast_variables,
)
from tfring.tensorflow.grad_reduction import DEFAULT_BUCKET_BYTES, bucketed_allreduce
from tfring.tensorflow.gradient_tape import DistributedGradientTape, PartialDistributedGradientTape
from tfring.tensorflow.grouped import grouped_allgather, grouped_reducescatter
from tfring.tensorflow.identity_ops import (
    cross_rank_op,
    cross_size_op,
    local_rank_op,
    local_size_op,
    process_set_included_op,
    rank_op,
    size_op,
)
from tfring.tensorflow.mpi_ops import (
    Adasum,
    Average,
    Max,
    Min,
    Product,
    Sum,
    allgather,
    allreduce,
    alltoall,
    barrier,
    broadcast,
    grouped_allreduce,
    join,
    reducescatter,
)
from tfring.tensorflow.tf1 import (
    BroadcastGlobalVariablesHook,
    DistributedOptimizer,
    broadcast_global_variables,
)

__all__ = [
    "DEFAULT_BUCKET_BYTES",
    "Adasum",
    "Average",
    "BroadcastGlobalVariablesHook",
    "Compression",
    "Compressor",
    "DistributedGradientTape",
    "DistributedOptimizer",
    "FP16Compressor",
    "Max",
    "Min",
    "NoneCompressor",
    "PartialDistributedGradientTape",
    "ProcessSet",
    "Product",
    "Sum",
    "SyncBatchNormalization",
    "add_process_set",
    "allgather",
    "allgather_object",
    "allreduce",
    "alltoall",
    "barrier",
    "broadcast",
    "broadcast_",
    "broadcast_global_variables",
    "broadcast_object",
    "broadcast_object_fn",
    "broadcast_variables",
    "bucketed_allreduce",
    "ccl_built",
    "cross_rank",
    "cross_rank_op",
    "cross_size",
    "cross_size_op",
    "cuda_built",
    "ddl_built",
    "elastic",
    "global_process_set",
    "gloo_built",
    "gloo_enabled",
    "grouped_allgather",
    "grouped_allreduce",
    "grouped_reducescatter",
    "init",
    "is_homogeneous",
    "is_initialized",
    "join",
    "local_rank",
    "local_rank_op",
    "local_size",
    "local_size_op",
    "mpi_built",
    "mpi_enabled",
    "mpi_threads_supported",
    "nccl_built",
    "process_set_included_op",
    "rank",
    "rank_op",
    "reducescatter",
    "remove_process_set",
    "rocm_built",
    "shutdown",
    "size",
    "size_op",
    "start_timeline",
    "stop_timeline",
    "summary",
]
from tfring.gpu import pin_gpu  # noqa: F401 - GPU pinning (tfring/gpu.py)


def __getattr__(name):
    # Horovod has hvd.SyncBatchNormalization in horovod.tensorflow too; importing Keras only
    # when it is used keeps `import tfring.tensorflow` free of Keras.
    if name == "SyncBatchNormalization":
        from tfring.keras.sync_batch_normalization import SyncBatchNormalization

        return SyncBatchNormalization
    raise AttributeError(f"module 'tfring.tensorflow' has no attribute '{name}'")
