"""tfring: ring-allreduce data-parallel training for TensorFlow 2 and Keras 3.

This top-level package needs no TensorFlow: it holds the process basics and collectives on
NumPy arrays. TensorFlow users import ``tfring.tensorflow`` or ``tfring.keras``.
"""

from tfring.basics import (
    build_info,
    config,
    config_table,
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
    stats,
    stop_timeline,
)
from tfring.ops import (
    Adasum,
    Average,
    Max,
    Min,
    Product,
    Sum,
    allgather,
    allgather_async,
    allreduce,
    allreduce_async,
    alltoall,
    alltoall_async,
    barrier,
    broadcast,
    broadcast_async,
    join,
    reducescatter,
    reducescatter_async,
)
from tfring.process_sets import (
    ProcessSet,
    add_process_set,
    global_process_set,
    remove_process_set,
)

__version__ = "0.1.0"


def __getattr__(name):  # RingStrategy needs TensorFlow: imported on first use only
    if name == "run":  # tfring.run(fn, np=2): the launcher, imported on first use
        from tfring.runner.python_launch import run

        return run
    if name in ("RingStrategy", "distribute"):
        import importlib

        distribute = importlib.import_module("tfring.distribute")
        return distribute if name == "distribute" else distribute.RingStrategy
    raise AttributeError(f"module 'tfring' has no attribute {name!r}")

__all__ = [
    "Adasum",
    "Average",
    "Max",
    "Min",
    "ProcessSet",
    "Product",
    "Sum",
    "__version__",
    "add_process_set",
    "allgather",
    "allgather_async",
    "allreduce",
    "allreduce_async",
    "alltoall",
    "alltoall_async",
    "barrier",
    "broadcast",
    "broadcast_async",
    "build_info",
    "config",
    "config_table",
    "cross_rank",
    "cross_size",
    "global_process_set",
    "init",
    "is_homogeneous",
    "is_initialized",
    "join",
    "local_rank",
    "local_size",
    "rank",
    "reducescatter",
    "reducescatter_async",
    "remove_process_set",
    "shutdown",
    "size",
    "start_timeline",
    "stats",
    "stop_timeline",
]
