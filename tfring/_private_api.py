"""The gateway to every private TensorFlow and Keras API tfring uses: the only tfring module
that imports ``tensorflow.python`` or ``keras.src``. Every other module takes such a name from
here (``from tfring import _private_api`` then ``_private_api.FuncGraph``).

TensorFlow and Keras offer no public way to write a ``tf.distribute`` strategy, name ops
after their ``tf.function``, let custom collectives run concurrently inside one, detect XLA
at trace time, reduce ``predict()`` outputs, swap Keras' loss-scale optimizer, save a
subclass under its base class's name, or write checkpoints on one rank only. Each such
symbol is a row of ``_EXPECTED`` (what tfring does with it and why), and every name this
module hands out (``_NAMES``) is covered by a row. ``check_private_apis()`` verifies, at the
first ``RingStrategy()``, that each row still exists with the parameters tfring calls or
overrides; ``tests/test_strategy_private_api.py`` runs the same check in CI and fails when
a module imports a private symbol from anywhere else. A TF/Keras upgrade that changes one
fails there with a message naming the symbol, rather than later with a hang or a silent
divergence. The private attributes of Keras objects tfring reads or sets are listed at the
end (``KERAS_*_ATTRIBUTES``) and pinned by tests on real objects.

Names are resolved on first use (``import tensorflow`` has loaded their modules already),
so a module that needs only some of them keeps working when an unrelated one changed; a
missing one raises ``PrivateApiError`` naming it. Thread-safe (resolving twice is harmless).

Tested with TensorFlow 2.21 and Keras 3.15 (the pinned versions).
"""

import importlib
import inspect

SUPPORTED = "TensorFlow 2.21 / Keras 3.15"

_DL = "tensorflow.python.distribute.distribute_lib."
_ODE = "tensorflow.python.distribute.one_device_strategy.OneDeviceExtended."
_CKPT = "tensorflow.python.checkpoint."

# Each entry: (dotted path, mode, parameters, why tfring needs it). Modes:
#   "override": tfring overrides or patches it and TF/Keras calls ours: parameters must match exactly.
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
     "trace-time error for join/barrier under jit_compile=True"),
    ("tensorflow.python.ops.resource_variable_ops.BaseResourceVariable.assign", _O,
     ("self", "value", "use_locking", "name", "read_value"), "metric variables synchronized on write"),
    ("tensorflow.python.ops.resource_variable_ops.BaseResourceVariable.assign_add", _O,
     ("self", "delta", "use_locking", "name", "read_value"), "metric variables synchronized on write"),
    ("tensorflow.python.ops.resource_variable_ops.BaseResourceVariable.assign_sub", _O,
     ("self", "delta", "use_locking", "name", "read_value"), "metric variables synchronized on write"),
    ("keras.src.backend.tensorflow.trainer.reduce_per_replica", _O, ("values", "strategy", "reduction"),
     "predict() gathers every rank's rows"),
    ("keras.src.trainers.trainer.Trainer.compile", _E, None, "agreed loss scaling; jit_compile off on a GPU"),
    ("keras.src.optimizers.loss_scale_optimizer.LossScaleOptimizer.check_finite", _O, ("self", "grads"),
     "finite check agreed across ranks (tfring.keras.LossScaleOptimizer)"),
    # checkpoints written once, by rank 0 (save_hooks)
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
    ("keras.src.utils.file_utils.makedirs", _O, ("path",),
     "a save's folder created at once on every rank (ModelCheckpoint's check-then-create)"),
    # tfring.tensorflow and tfring.keras
    ("tensorflow.python.framework.func_graph.FuncGraph", _E, None,
     "tfring._tensorflow.naming: stable negotiation names inside tf.function"),
    ("tensorflow.python.framework.auto_control_deps.MUST_RUN_ORDER_INSENSITIVE_STATEFUL_OPS", _E, None,
     "tfring._tensorflow._loader: collectives inside tf.function run concurrently"),
    ("keras.src.api_export.get_name_from_symbol", _C, ("symbol",),
     "tfring._keras.serialization: tfring optimizers saved under the Keras class's public name"),
    ("keras.src.api_export.REGISTERED_OBJS_TO_NAMES", _E, None, "tfring._keras.serialization"),
    ("keras.src.saving.object_registration.GLOBAL_CUSTOM_NAMES", _E, None, "tfring._keras.serialization"),
    ("keras.src.optimizers.base_optimizer.BaseOptimizer._get_variable_index", _C, ("self", "variable"),
     "tfring.keras.DistributedOptimizer(backward_passes_per_step > 1): the accumulator slot of a variable"),
]


class PrivateApiError(RuntimeError):
    """A private TensorFlow/Keras API that tfring relies on changed or vanished."""


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
            f"tfring relies on private TensorFlow/Keras APIs that changed in this "
            f"installation (TensorFlow {tf.__version__}, Keras {keras.__version__}; tfring supports "
            f"{SUPPORTED}). Pin the supported versions (pip install 'tensorflow-cpu==2.21.*' "
            f"'keras==3.15.*') or upgrade tfring. Changed:\n  - " + "\n  - ".join(problems)
        )




# --- the names tfring takes from here: name -> dotted path (each covered by a row above) ------
_DIST = "tensorflow.python.distribute."
_NAMES = {
    # tf.distribute internals (tfring.distribute: RingStrategy, its replica context, datasets)
    "Strategy": _DL + "Strategy",
    "ReplicaContext": _DL + "ReplicaContext",
    "InputContext": _DL + "InputContext",
    "ValueContext": _DL + "ValueContext",
    "get_update_replica_id": _DL + "get_update_replica_id",
    "OneDeviceExtended": _DIST + "one_device_strategy.OneDeviceExtended",
    "get_distributed_dataset": _DIST + "input_util.get_distributed_dataset",
    "BaseResourceVariable": "tensorflow.python.ops.resource_variable_ops.BaseResourceVariable",
    # checkpoints, SavedModel and Keras saving (tfring._distribute.save_hooks patches these)
    "Checkpoint": _CKPT + "checkpoint.Checkpoint",
    "TrackableSaver": _CKPT + "checkpoint.TrackableSaver",
    "checkpoint_management": _CKPT + "checkpoint_management",
    "saved_model_save_module": "tensorflow.python.saved_model.save",
    "saved_model_load_module": "tensorflow.python.saved_model.load",
    "keras_saving_api": "keras.src.saving.saving_api",
    "KerasBackupAndRestore": "keras.src.callbacks.backup_and_restore.BackupAndRestore",
    "keras_file_utils": "keras.src.utils.file_utils",
    # tf.function internals (tfring.tensorflow: names, op ordering, the XLA check)
    "FuncGraph": "tensorflow.python.framework.func_graph.FuncGraph",
    "auto_control_deps": "tensorflow.python.framework.auto_control_deps",
    "GraphOrParentsInXlaContext": "tensorflow.python.ops.control_flow_util.GraphOrParentsInXlaContext",
    # Keras internals (tfring.keras and RingStrategy's Keras hooks)
    "KerasTrainer": "keras.src.trainers.trainer.Trainer",
    "keras_reduce_per_replica_module": "keras.src.backend.tensorflow.trainer",
    "keras_api_export": "keras.src.api_export",
    "keras_object_registration": "keras.src.saving.object_registration",
}


def __getattr__(name):
    """Resolves a name of ``_NAMES`` on first use (then it is a plain module attribute)."""
    path = _NAMES.get(name)
    if path is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        value = _resolve(path)
    except (ImportError, AttributeError) as e:
        raise PrivateApiError(
            f"tfring needs the private TensorFlow/Keras symbol {path}, which this installation lacks "
            f"({type(e).__name__}: {e}); tfring supports {SUPPORTED}."
        ) from e
    globals()[name] = value
    return value


def _get(name):
    """A name of ``_NAMES`` from inside this module (where ``__getattr__`` is not consulted)."""
    return globals()[name] if name in globals() else __getattr__(name)


# --- small helpers around private details that are not symbols --------------------------------

# Private attributes of Keras objects that tfring reads or sets, pinned by tests on real
# objects (tests/test_saving_single.py, tests/test_strategy_private_api.py):
# Keras' BackupAndRestore, read by save_hooks (set by its __init__);
KERAS_BACKUP_ATTRIBUTES = ("backup_dir", "double_checkpoint", "delete_checkpoint", "_weights_path",
                           "_training_metadata_path", "_prev_weights_path", "_prev_training_metadata_path",
                           "_current_epoch", "_last_batch_seen")
# a built Keras optimizer, read by tfring._keras.distributed_optimizer (the variables applied,
# the step counter) and callbacks.learning_rate (the schedule in an error message);
KERAS_OPTIMIZER_ATTRIBUTES = ("_trainable_variables", "_iterations", "_learning_rate")
# a Keras model: jit_compile before "auto" is resolved (model_preparation) and the epoch
# fit() starts from (set by callbacks.checkpoint's BackupAndRestore, as Keras' own does).
KERAS_MODEL_ATTRIBUTES = ("_jit_compile", "_initial_epoch")


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
    return _get("get_update_replica_id")() is not None
