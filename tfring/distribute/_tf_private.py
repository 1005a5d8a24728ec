"""The table of every private TensorFlow and Keras API tfring uses, and the only module of
tfring.distribute that imports them. (A few other modules import one private symbol each
where importing this module would be circular or heavy: tfring.tensorflow's naming, XLA
check and op loader, tfring.keras' serialization aliases. Their symbols are in the table
too, and tests/test_strategy_private_api.py fails when any module uses a private symbol
the table lacks.)

``tf.distribute`` offers no public way to write a strategy: ``RingStrategy`` derives from
``one_device_strategy.OneDeviceExtended`` and calls a handful of internal helpers (input
pipelines, replica contexts, XLA detection). Keras 3 gives no public hook to reduce
``predict()`` outputs or to swap its loss-scale optimizer under a strategy. Every such
symbol is imported here, and ``check_private_apis()`` verifies, at the first
``RingStrategy()``, that each still exists with the parameters tfring calls or overrides.
A TF/Keras upgrade that changes one fails there with a message naming the symbol, rather
than later with a hang or a silent divergence. ``tests/test_strategy_private_api.py``
runs the same check in CI.

Tested with TensorFlow 2.21 and Keras 3.15 (the pinned versions).
"""

import importlib
import inspect

SUPPORTED = "TensorFlow 2.21 / Keras 3.15"

_DL = "tensorflow.python.distribute.distribute_lib."
_ODE = "tensorflow.python.distribute.one_device_strategy.OneDeviceExtended."
_CKPT = "tensorflow.python.checkpoint."

# Each entry: (dotted path, mode, parameters, why tfring needs it). Modes:
#   "override": RingExtended overrides it and TF calls ours: parameters must match exactly.
#   "call": tfring calls it: the parameters must start with these; any others need defaults.
#   "exists": only its existence is relied on.
_O, _C, _E = "override", "call", "exists"
_EXPECTED = [
    (_DL + "Strategy.__init__", _C, ("self", "extended"), "RingStrategy derives from it"),
    (_DL + "ReplicaContext.__init__", _C, ("self", "strategy", "replica_id_in_sync_group"),
     "the replica context of strategy.run"),
    (_DL + "InputContext.__init__", _C,
     ("self", "num_input_pipelines", "input_pipeline_id", "num_replicas_in_sync"), "InputContext with this rank"),
    (_DL + "ValueContext.__init__", _C, ("self", "replica_id_in_sync_group", "num_replicas_in_sync"),
     "experimental_distribute_values_from_function"),
    (_DL + "get_update_replica_id", _C, (), "no metric sync inside strategy.extended.update"),
    (_DL + "StrategyExtendedV1._use_merge_call", _E, None, "Keras' optimizer reduces through merge_call"),
    (_DL + "StrategyExtendedV2._batch_reduce_to", _O, ("self", "reduce_op", "value_destination_pairs", "options"),
     "gradients: one grouped allreduce"),
    (_ODE + "__init__", _C, ("self", "container_strategy", "device"), "base class of RingExtended"),
    (_ODE + "_input_workers_with_options", _C, ("self", "options"), "input workers of datasets"),
    (_ODE + "_container_strategy", _C, ("self",), "the strategy of the extended object"),
    (_ODE + "_call_for_each_replica", _O, ("self", "fn", "args", "kwargs"), "strategy.run"),
    (_ODE + "_create_variable", _O, ("self", "next_creator", "kwargs"), "variables start equal on every rank"),
    (_ODE + "_reduce_to", _O, ("self", "reduce_op", "value", "destinations", "options"), "strategy.reduce"),
    (_ODE + "_gather_to_implementation", _O, ("self", "value", "destinations", "axis", "options"),
     "strategy.gather / all_gather"),
    (_ODE + "_experimental_distribute_dataset", _O, ("self", "dataset", "options"), "dataset sharded by rank"),
    (_ODE + "_distribute_datasets_from_function", _O, ("self", "dataset_fn", "options"),
     "InputContext with this rank"),
    (_ODE + "_experimental_distribute_values_from_function", _O, ("self", "value_fn"), "ValueContext of this rank"),
    (_ODE + "_get_local_replica_id", _O, ("self", "replica_id_in_sync_group"), "one local replica"),
    (_ODE + "_in_multi_worker_mode", _O, ("self",), "must stay False (True makes batches PerReplica)"),
    (_ODE + "_num_replicas_in_sync", _E, None, "num_replicas_in_sync == world size"),
    ("tensorflow.python.distribute.input_util.get_distributed_dataset", _C,
     ("dataset", "input_workers", "strategy", "num_replicas_in_sync", "input_context", "options"),
     "rebatch to batch/size and shard by rank"),
    ("tensorflow.python.distribute.input_lib.DistributedDataset._create_cloned_datasets_from_dataset", _E, None,
     "the per-rank dataset (its _cloned_datasets)"),
    ("tensorflow.python.ops.control_flow_util.GraphOrParentsInXlaContext", _C, ("graph",),
     "clear error under jit_compile=True"),
    ("tensorflow.python.ops.resource_variable_ops.BaseResourceVariable.assign", _O,
     ("self", "value", "use_locking", "name", "read_value"), "metric variables synchronized on write"),
    ("tensorflow.python.ops.resource_variable_ops.BaseResourceVariable.assign_add", _O,
     ("self", "delta", "use_locking", "name", "read_value"), "metric variables synchronized on write"),
    ("tensorflow.python.ops.resource_variable_ops.BaseResourceVariable.assign_sub", _O,
     ("self", "delta", "use_locking", "name", "read_value"), "metric variables synchronized on write"),
    ("keras.src.backend.tensorflow.trainer.reduce_per_replica", _O, ("values", "strategy", "reduction"),
     "predict() gathers every rank's rows"),
    ("keras.src.trainers.trainer.Trainer.compile", _E, None, "agreed loss scaling and jit_compile off"),
    ("keras.src.optimizers.loss_scale_optimizer.LossScaleOptimizer.check_finite", _O, ("self", "grads"),
     "finite check agreed across ranks (tfring.keras.LossScaleOptimizer)"),    # checkpoints written once, by rank 0 (save_hooks)
    (_CKPT + "checkpoint.Checkpoint._write", _O, ("self", "file_prefix", "options"),
     "every tf.train.Checkpoint save/write and CheckpointManager.save coordinated"),
    (_CKPT + "checkpoint.TrackableSaver.save", _O, ("self", "file_prefix", "checkpoint_number", "session", "options"),
     "checkpoint files written atomically by rank 0 only"),
    (_CKPT + "checkpoint_management.update_checkpoint_state_internal", _C, ("save_dir", "model_checkpoint_path"),
     "the `checkpoint` state file written by rank 0 only"),
    (_CKPT + "checkpoint_management._delete_file_if_exists", _O, ("filespec",),
     "CheckpointManager max_to_keep deletions done by rank 0 only"),
    ("tensorflow.python.saved_model.save.save", _C, ("obj", "export_dir", "signatures", "options"),
     "tf.saved_model.save written by rank 0 only"),
    ("keras.src.saving.saving_api.save_model", _O, ("model", "filepath", "overwrite", "zipped", "kwargs"),
     "model.save written by rank 0 only"),
    ("keras.src.saving.saving_api.load_model", _C, ("filepath",),
     "variables created by keras.models.load_model are not broadcast (the load may run on one rank)"),
    ("keras.src.saving.saving_api.load_weights", _C, ("model", "filepath"),
     "variables created by model.load_weights are not broadcast (the load may run on one rank)"),
    ("tensorflow.python.saved_model.load.load", _C, ("export_dir",),
     "variables created by tf.saved_model.load are not broadcast (the load may run on one rank)"),
    ("keras.src.saving.saving_api.save_weights", _O, ("model", "filepath", "overwrite", "max_shard_size", "kwargs"),
     "model.save_weights written by rank 0 only"),
    ("keras.src.callbacks.backup_and_restore.BackupAndRestore._save_model", _O, ("self",),
     "Keras BackupAndRestore backups written by rank 0 only"),
    ("keras.src.callbacks.backup_and_restore.BackupAndRestore.on_train_end", _O, ("self", "logs"),
     "Keras BackupAndRestore backup removed by rank 0 only"),
    # used outside tfring.distribute
    ("tensorflow.python.framework.func_graph.FuncGraph", _E, None,
     "tfring.tensorflow.naming: stable negotiation names inside tf.function"),
    ("tensorflow.python.framework.auto_control_deps.MUST_RUN_ORDER_INSENSITIVE_STATEFUL_OPS", _E, None,
     "tfring.tensorflow._loader: collectives inside tf.function run concurrently"),
    ("keras.src.api_export.get_name_from_symbol", _C, ("symbol",),
     "tfring.keras.saving: tfring optimizers saved under the Keras class's public name"),
    ("keras.src.api_export.REGISTERED_OBJS_TO_NAMES", _E, None, "tfring.keras.saving"),
    ("keras.src.saving.object_registration.GLOBAL_CUSTOM_NAMES", _E, None, "tfring.keras.saving"),
]


class PrivateApiError(RuntimeError):
    """A private TensorFlow/Keras API that RingStrategy relies on changed or vanished."""


def _resolve(path):
    """Imports the longest importable module prefix of ``path`` and walks attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)  # AttributeError propagates
        return obj
    raise ImportError(f"no module of {path} can be imported")


def find_problems(expected=None):
    """Returns a list of human-readable problems (empty when every API is as expected)."""
    problems = []
    for path, mode, params, why in _EXPECTED if expected is None else expected:
        try:
            obj = _resolve(path)
        except (ImportError, AttributeError) as e:
            problems.append(f"{path}: missing ({type(e).__name__}: {e}); needed for: {why}")
            continue
        if mode == _E:
            continue
        try:
            sig = inspect.signature(obj)
        except (TypeError, ValueError) as e:
            problems.append(f"{path}: no inspectable signature ({e}); needed for: {why}")
            continue
        got = tuple(p.name for p in sig.parameters.values())
        extra = list(sig.parameters.values())[len(params):]
        if mode == _O:
            bad = got != tuple(params)
        else:
            bad = got[: len(params)] != tuple(params) or any(
                p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                for p in extra)
        if bad:
            problems.append(f"{path}: parameters changed: expected {tuple(params)}"
                            f"{'' if mode == _O else ' (+ optional ones)'}, found {got}; needed for: {why}")
    return problems


def check_private_apis(expected=None):
    """Raises ``PrivateApiError`` naming every private API that no longer matches."""
    problems = find_problems(expected)
    if problems:
        import keras
        import tensorflow as tf

        raise PrivateApiError(
            f"tfring.RingStrategy relies on private TensorFlow/Keras APIs that changed in this "
            f"installation (TensorFlow {tf.__version__}, Keras {keras.__version__}; tfring supports "
            f"{SUPPORTED}). Pin the supported versions (pip install 'tensorflow-cpu==2.21.*' "
            f"'keras==3.15.*') or upgrade tfring. Changed:\n  - " + "\n  - ".join(problems)
        )


# --- the symbols themselves (imported after the table so a failure names the symbol) --------
try:
    from keras.src.backend.tensorflow import trainer as keras_tf_trainer
    from keras.src.callbacks import backup_and_restore as keras_backup_and_restore
    from keras.src.saving import saving_api
    from keras.src.trainers import trainer as keras_trainer
    from tensorflow.python.checkpoint import checkpoint as tf_checkpoint
    from tensorflow.python.checkpoint import checkpoint_management as tf_checkpoint_management
    from tensorflow.python.distribute import distribute_lib, input_util, one_device_strategy
    from tensorflow.python.ops import control_flow_util, resource_variable_ops
    from tensorflow.python.saved_model import load as tf_saved_model_load
    from tensorflow.python.saved_model import save as tf_saved_model_save
except ImportError as _e:  # pragma: no cover - only on an unsupported TF/Keras
    raise PrivateApiError(
        f"tfring.RingStrategy cannot import a private TensorFlow/Keras module ({_e}); tfring "
        f"supports {SUPPORTED}."
    ) from _e

Strategy = distribute_lib.Strategy
ReplicaContext = distribute_lib.ReplicaContext
InputContext = distribute_lib.InputContext
ValueContext = distribute_lib.ValueContext
OneDeviceExtended = one_device_strategy.OneDeviceExtended
BaseResourceVariable = resource_variable_ops.BaseResourceVariable
get_distributed_dataset = input_util.get_distributed_dataset
KerasTrainer = keras_trainer.Trainer
keras_reduce_per_replica_module = keras_tf_trainer
# save_hooks patches attributes of these modules / classes (the table above pins them)
Checkpoint = tf_checkpoint.Checkpoint
TrackableSaver = tf_checkpoint.TrackableSaver
checkpoint_management = tf_checkpoint_management
saved_model_save_module = tf_saved_model_save
saved_model_load_module = tf_saved_model_load
keras_saving_api = saving_api

KerasBackupAndRestore = keras_backup_and_restore.BackupAndRestore

# Attributes of Keras' BackupAndRestore that save_hooks reads (set by its __init__).
KERAS_BACKUP_ATTRIBUTES = ("backup_dir", "double_checkpoint", "delete_checkpoint", "_weights_path",
                           "_training_metadata_path", "_prev_weights_path", "_prev_training_metadata_path",
                           "_current_epoch", "_last_batch_seen")


def single_worker_dataset(distributed):
    """The one ``tf.data.Dataset`` (rebatched and sharded for this rank) inside a
    ``DistributedDataset`` built for one input worker."""
    datasets = getattr(distributed, "_cloned_datasets", None)
    if not isinstance(datasets, list) or len(datasets) != 1:
        raise PrivateApiError(
            "tfring.RingStrategy expected DistributedDataset._cloned_datasets to hold one tf.data.Dataset "
            f"per input worker (TF 2.21); found {type(datasets).__name__}. tfring supports {SUPPORTED}."
        )
    return datasets[0]


def in_update_context():
    """True inside ``strategy.extended.update`` (an optimizer applying reduced gradients)."""
    return distribute_lib.get_update_replica_id() is not None


def in_xla_context():
    """True while tracing inside an XLA-compiled function (``jit_compile=True``)."""
    import tensorflow as tf

    if tf.executing_eagerly():
        return False
    return bool(control_flow_util.GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))


def keras_loss_scale_optimizer_class():
    from keras.src.optimizers.loss_scale_optimizer import LossScaleOptimizer

    return LossScaleOptimizer
