"""The export tables: every public package's public names and where each comes from.

This is the one place a public name is added, moved or removed. A package's ``__init__``
binds its names from here (``binding.bind``) and ``tests/test_public_api.py`` checks every
package against its table, so a name listed here is importable, in ``__all__`` and in
``dir()``, and nothing else is public. Strings only: reading a table imports nothing.

Rows:
  Names(module, "a b")      ``a`` and ``b`` are ``module.a`` and ``module.b``
  Modules("a b")            the package's submodules ``a`` and ``b``
  Defined("a")              defined by the package's own ``__init__`` (a constant)
``lazy=True``: imported on first use, not with the package (TensorFlow, Keras, Ray or the
launcher behind it), so ``import tfring`` needs no TensorFlow and ``import
tfring.tensorflow`` no Keras.
"""

import dataclasses


class _Row:
    @property
    def names(self):
        return tuple(self.names_text.split())


@dataclasses.dataclass(frozen=True)
class Names(_Row):
    module: str
    names_text: str
    lazy: bool = False


@dataclasses.dataclass(frozen=True)
class Modules(_Row):
    names_text: str
    lazy: bool = False


@dataclasses.dataclass(frozen=True)
class Defined(_Row):
    names_text: str
    lazy: bool = False


# The block the three API packages (tfring, tfring.tensorflow, tfring.keras) share: process
# basics, process sets and reduce ops (the same objects in all three).
PROCESS = (
    Names("tfring.basics", "cross_rank cross_size init is_homogeneous is_initialized local_rank local_size "
                           "rank shutdown size start_timeline stop_timeline"),
    Names("tfring.process_sets", "ProcessSet add_process_set global_process_set remove_process_set"),
    Names("tfring.ops", "Adasum Average Max Min Product Sum"),
)
# Horovod's build queries, in horovod.tensorflow and horovod.tensorflow.keras.
CAPABILITIES = (
    Names("tfring.capabilities", "ccl_built cuda_built ddl_built gloo_built gloo_enabled mpi_built mpi_enabled "
                                 "mpi_threads_supported nccl_built rocm_built"),
)
# Helpers on TF values that tfring.keras takes from tfring.tensorflow, as horovod.tensorflow.keras.
TF_VALUES = (
    Names("tfring.tensorflow.compression", "Compression"),
    Names("tfring.tensorflow.functions", "allgather_object broadcast_object broadcast_variables"),
    Names("tfring.gpu", "pin_gpu"),
)

# hvd.elastic of tfring.tensorflow and tfring.keras (the Keras one adds KerasState and the
# callbacks): the TF states and run of tfring/_elastic/.
TF_ELASTIC = (
    Names("tfring._elastic.exceptions", "HorovodInternalError HostsUpdatedInterrupt JobEndedError"),
    Names("tfring._elastic.state", "State"),
    Names("tfring._elastic.tf_state", "ObjectState TensorFlowKerasState generation run"),
)

TABLES = {
    "tfring": (
        *PROCESS,
        Names("tfring.basics", "build_info config config_table stats"),
        Names("tfring.gpu", "gpu_info"),
        Names("tfring.ops", "allgather allgather_async allreduce allreduce_async alltoall alltoall_async barrier "
                            "broadcast broadcast_async join reducescatter reducescatter_async"),
        Defined("__version__"),
        Names("tfring.distribute", "RingStrategy", lazy=True),
        Modules("distribute", lazy=True),
        Names("tfring.runner.python_launch", "run", lazy=True),
    ),
    "tfring.tensorflow": (
        *PROCESS,
        *CAPABILITIES,
        Modules("elastic summary"),
        *TF_VALUES,
        Names("tfring.tensorflow.compression", "Compressor FP16Compressor NoneCompressor"),
        Names("tfring.tensorflow.functions", "broadcast_ broadcast_object_fn"),
        Names("tfring.tensorflow.grad_reduction", "DEFAULT_BUCKET_BYTES bucketed_allreduce"),
        Names("tfring.tensorflow.gradient_tape", "DistributedGradientTape PartialDistributedGradientTape"),
        Names("tfring.tensorflow.grouped", "grouped_allgather grouped_reducescatter"),
        Names("tfring.tensorflow.identity_ops", "cross_rank_op cross_size_op local_rank_op local_size_op "
                                                "process_set_included_op rank_op size_op"),
        Names("tfring.tensorflow.mpi_ops", "allgather allreduce alltoall barrier broadcast grouped_allreduce join "
                                           "reducescatter"),
        Names("tfring.tensorflow.tf1", "BroadcastGlobalVariablesHook DistributedOptimizer "
                                       "broadcast_global_variables"),
        # horovod.tensorflow has it too; Keras is imported only when it is used.
        Names("tfring.keras.sync_batch_normalization", "SyncBatchNormalization", lazy=True),
    ),
    "tfring.keras": (
        *PROCESS,
        *CAPABILITIES,
        *TF_VALUES,
        Modules("callbacks elastic"),
        Names("tfring.keras.collectives", "allgather allreduce broadcast broadcast_global_variables reducescatter"),
        Names("tfring.keras.distributed_optimizer", "DistributedOptimizer PartialDistributedOptimizer "
                                                    "is_distributed"),
        Names("tfring.keras.loss_scale_optimizer", "LossScaleOptimizer"),
        Names("tfring.keras.saving", "load_model"),
        Names("tfring.keras.state", "broadcast_model_state"),
        Names("tfring.keras.sync_batch_normalization", "SyncBatchNormalization"),
        Names("tfring.keras.verbosity", "verbose"),
    ),
    "tfring.tensorflow.elastic": (
        *TF_ELASTIC,
        Names("tfring._elastic.tf_state", "TensorFlowState"),
    ),
    "tfring.keras.elastic": (
        *TF_ELASTIC,
        Names("tfring._elastic.keras_state", "CommitStateCallback KerasState UpdateBatchStateCallback "
                                             "UpdateEpochStateCallback"),
    ),
    "tfring.keras.callbacks": (
        Names("tfring.keras.callbacks.broadcast_global_variables", "BroadcastGlobalVariablesCallback"),
        Names("tfring.keras.callbacks.checkpoint", "BackupAndRestore ModelCheckpoint"),
        Names("tfring.keras.callbacks.learning_rate", "LearningRateScheduleCallback LearningRateWarmupCallback"),
        Names("tfring.keras.callbacks.metric_average", "MetricAverageCallback"),
        Names("tfring.keras.callbacks.tensorboard", "TensorBoard"),
        Names("tfring.keras.callbacks.tfring_metrics", "TfringMetricsCallback"),
    ),
    "tfring.distribute": (
        Names("tfring._private_api", "PrivateApiError"),
        Names("tfring.distribute.strategy", "RingStrategy"),
    ),
    "tfring.elastic": (
        Names("tfring._elastic.exceptions", "HorovodInternalError HostsUpdatedInterrupt JobEndedError"),
        Names("tfring._elastic.run", "lost_job_member reset run_fn"),
        Names("tfring._elastic.state", "ObjectState State"),
    ),
    "tfring.saving": (
        Names("tfring.saving.atomic", "atomic_write atomic_write_checkpoint atomic_write_directory"),
        Names("tfring.saving.coordination", "SaveAbortedError coordinated_save local_save"),
    ),
    "tfring.runner": (
        Names("tfring.runner.rendezvous", "Store rank_identities"),
    ),
    "tfring.ray": (
        Defined("SUPPORTED_RAY"),
        Names("tfring.ray.executor", "RayExecutor", lazy=True),
        Names("tfring.ray.train", "TfringConfig TfringTrainer", lazy=True),
    ),
    "tfring.spark": (
        Names("tfring.runner.function_job", "RankError"),
        Names("tfring.spark.driver", "run"),
        Names("tfring.spark.horovod_runner", "TfringRunner"),
    ),
}


def public_names(package):
    """The sorted public names of ``package`` (its ``__all__``)."""
    return sorted({name for row in TABLES[package] for name in row.names})
