"""tfring for Keras 3 (``import tfring.keras as hvd``), Horovod's ``horovod.keras`` API.

Process basics, constants, process sets and the timeline come from ``tfring.tensorflow``;
``allreduce``, ``allgather``, ``broadcast`` and ``reducescatter`` take tensor-compatible
values and return tensors (``tf.Tensor`` when eager), and ``broadcast_global_variables``
is for ``tf.compat.v1`` graphs, as in ``horovod.tensorflow.keras`` (``collectives``).
"""

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
from tfring.keras import callbacks, elastic
from tfring.keras.collectives import (
    allgather,
    allreduce,
    broadcast,
    broadcast_global_variables,
    reducescatter,
)
from tfring.keras.distributed_optimizer import (
    DistributedOptimizer,
    PartialDistributedOptimizer,
    is_distributed,
)
from tfring.keras.loss_scale_optimizer import LossScaleOptimizer
from tfring.keras.saving import load_model
from tfring.keras.state import broadcast_model_state
from tfring.keras.sync_batch_normalization import SyncBatchNormalization
from tfring.keras.verbosity import verbose
from tfring.tensorflow import (
    Adasum,
    Average,
    Compression,
    Max,
    Min,
    ProcessSet,
    Product,
    Sum,
    add_process_set,
    allgather_object,
    broadcast_object,
    broadcast_variables,
    cross_rank,
    cross_size,
    global_process_set,
    init,
    is_homogeneous,
    is_initialized,
    local_rank,
    local_size,
    rank,
    remove_process_set,
    shutdown,
    size,
    start_timeline,
    stop_timeline,
)

__all__ = [
    "Adasum",
    "Average",
    "Compression",
    "DistributedOptimizer",
    "LossScaleOptimizer",
    "Max",
    "Min",
    "PartialDistributedOptimizer",
    "ProcessSet",
    "Product",
    "Sum",
    "SyncBatchNormalization",
    "add_process_set",
    "allgather",
    "allgather_object",
    "allreduce",
    "broadcast",
    "broadcast_global_variables",
    "broadcast_model_state",
    "broadcast_object",
    "broadcast_variables",
    "callbacks",
    "ccl_built",
    "cross_rank",
    "cross_size",
    "cuda_built",
    "ddl_built",
    "elastic",
    "global_process_set",
    "gloo_built",
    "gloo_enabled",
    "init",
    "is_distributed",
    "is_homogeneous",
    "is_initialized",
    "load_model",
    "local_rank",
    "local_size",
    "mpi_built",
    "mpi_enabled",
    "mpi_threads_supported",
    "nccl_built",
    "rank",
    "reducescatter",
    "remove_process_set",
    "rocm_built",
    "shutdown",
    "size",
    "start_timeline",
    "stop_timeline",
    "verbose",
]
from tfring.gpu import pin_gpu  # noqa: F401 - GPU pinning (tfring/gpu.py)
