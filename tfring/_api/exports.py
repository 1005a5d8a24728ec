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
    Names("tfring._basics.basics", "cross_rank cross_size init is_homogeneous is_initialized local_rank local_size "
                           "rank shutdown size start_timeline stop_timeline"),
    Names("tfring._basics.process_sets", "ProcessSet add_process_set global_process_set remove_process_set"),
    Names("tfring._basics.ops", "Adasum Average Max Min Product Sum"),
)
# Horovod's build queries, in horovod.tensorflow and horovod.tensorflow.keras.
CAPABILITIES = (
    Names("tfring._basics.capabilities", "ccl_built cuda_built ddl_built gloo_built gloo_enabled mpi_built mpi_enabled "
                                 "mpi_threads_supported nccl_built rocm_built"),
)
# Helpers on TF values that tfring.keras takes from tfring.tensorflow, as horovod.tensorflow.keras.
TF_VALUES = (
    Names("tfring._tensorflow.compression", "Compression"),
    Names("tfring._tensorflow.functions", "allgather_object broadcast_object broadcast_variables"),
    Names("tfring._basics.gpu", "pin_gpu"),
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
        Names("tfring._basics.basics", "build_info config config_table stats"),
        Names("tfring._basics.gpu", "gpu_info"),
        Names("tfring._basics.ops", "allgather allgather_async allreduce allreduce_async alltoall alltoall_async barrier "
                            "broadcast broadcast_async join reducescatter reducescatter_async"),
        Names("tfring._basics", "__version__"),
        Modules("errors"),
        Names("tfring._distribute.strategy", "RingStrategy", lazy=True),
        Modules("distribute", lazy=True),
        Names("tfring._runner.python_launch", "run", lazy=True),
    ),
    "tfring.tensorflow": (
        *PROCESS,
        *CAPABILITIES,
        Modules("elastic summary"),
        *TF_VALUES,
        Names("tfring._tensorflow.compression", "Compressor FP16Compressor NoneCompressor"),
        Names("tfring._tensorflow.functions", "broadcast_ broadcast_object_fn"),
        Names("tfring._tensorflow.grad_reduction", "DEFAULT_BUCKET_BYTES bucketed_allreduce"),
        Names("tfring._tensorflow.gradient_tape", "DistributedGradientTape PartialDistributedGradientTape"),
        Names("tfring._tensorflow.grouped", "grouped_allgather grouped_reducescatter"),
        Names("tfring._tensorflow.identity_ops", "cross_rank_op cross_size_op local_rank_op local_size_op "
                                                "process_set_included_op rank_op size_op"),
        Names("tfring._tensorflow.mpi_ops", "allgather allreduce alltoall barrier broadcast grouped_allreduce join "
                                           "reducescatter"),
        Names("tfring._tensorflow.tf1", "BroadcastGlobalVariablesHook DistributedOptimizer "
                                       "broadcast_global_variables"),
        # horovod.tensorflow has it too; Keras is imported only when it is used.
        Names("tfring._keras.sync_batch_normalization", "SyncBatchNormalization", lazy=True),
    ),
    "tfring.keras": (
        *PROCESS,
        *CAPABILITIES,
        *TF_VALUES,
        Modules("callbacks elastic"),
        Names("tfring._keras.collectives", "allgather allreduce broadcast broadcast_global_variables reducescatter"),
        Names("tfring._keras.distributed_optimizer", "DistributedOptimizer PartialDistributedOptimizer "
                                                    "is_distributed"),
        Names("tfring._keras.loss_scale_optimizer", "LossScaleOptimizer"),
        Names("tfring._keras.saving", "load_model"),
        Names("tfring._keras.state", "broadcast_model_state"),
        Names("tfring._keras.sync_batch_normalization", "SyncBatchNormalization"),
        Names("tfring._keras.verbosity", "verbose"),
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
        Names("tfring._keras.callbacks.broadcast_global_variables", "BroadcastGlobalVariablesCallback"),
        Names("tfring._keras.callbacks.checkpoint", "BackupAndRestore ModelCheckpoint"),
        Names("tfring._keras.callbacks.learning_rate", "LearningRateScheduleCallback LearningRateWarmupCallback"),
        Names("tfring._keras.callbacks.metric_average", "MetricAverageCallback"),
        Names("tfring._keras.callbacks.tensorboard", "TensorBoard"),
        Names("tfring._keras.callbacks.tfring_metrics", "TfringMetricsCallback"),
    ),
    "tfring.distribute": (
        Names("tfring._private_api", "PrivateApiError"),
        Names("tfring._distribute.strategy", "RingStrategy"),
    ),
    "tfring.elastic": (
        Names("tfring._elastic.exceptions", "HorovodInternalError HostsUpdatedInterrupt JobEndedError"),
        Names("tfring._elastic.run", "lost_job_member reset run_fn"),
        Names("tfring._elastic.state", "ObjectState State"),
    ),
    "tfring.saving": (
        Names("tfring._saving.atomic", "atomic_write atomic_write_checkpoint atomic_write_directory"),
        Names("tfring._saving.coordination", "SaveAbortedError coordinated_save local_save"),
    ),
    "tfring.runner": (
        Names("tfring._runner.rendezvous", "Store rank_identities"),
    ),
    "tfring.ray": (
        Names("tfring._engines.ray", "SUPPORTED_RAY"),
        Names("tfring._engines.ray.executor", "RayExecutor", lazy=True),
        Names("tfring._engines.ray.train", "TfringConfig TfringTrainer", lazy=True),
    ),
    "tfring.spark": (
        Names("tfring._runner.function_job", "RankError"),
        Names("tfring._engines.spark.driver", "run"),
        Names("tfring._engines.spark.horovod_runner", "TfringRunner"),
    ),
    # The faces that are modules: Horovod's module paths, documented module paths and the
    # entry points run with ``python -m`` (each also runs its entry's main as __main__).
    "tfring.errors": (
        Names("tfring._errors", "AbortedError InternalError InvalidArgumentError MismatchError PeerLostError "
                                "PreconditionError TfringError TimeoutError UnimplementedError from_code"),
    ),
    "tfring.monitoring": (
        Names("tfring._basics.monitoring", "Interval interval_metrics"),
    ),
    "tfring.tensorflow.summary": (
        Names("tfring._tensorflow.summary", "SCALARS write_metrics write_tfring_metrics"),
    ),
    "tfring.tensorflow.compression": (
        Names("tfring._tensorflow.compression", "Compression Compressor FP16Compressor NoneCompressor"),
    ),
    "tfring.tensorflow.xla": (
        Names("tfring._tensorflow.xla", "XlaCompilationError cuda_handler_status in_xla_context"),
    ),
    "tfring.tensorflow.data.compute_service": (
        Names("tfring._tensorflow.data.compute_service", "TfDataServiceConfig compute_worker_fn "
                                                         "send_to_data_service tf_data_service"),
    ),
    "tfring.tensorflow.data.compute_worker": (
        Names("tfring._engines.data_service.compute_worker", "main"),
    ),
    "tfring.spark.compute_worker": (
        Names("tfring._engines.spark.compute_worker", "main run"),
    ),
    "tfring.runner.launch": (
        Names("tfring._runner.launch", "main"),
    ),
    "tfring.migrate": (
        Names("tfring._migrate.cli", "main"),
    ),
}


def public_names(package):
    """The sorted public names of ``package`` (its ``__all__``)."""
    return sorted({name for row in TABLES[package] for name in row.names})
