"""What ``tfring-migrate`` knows: the tables behind every rewrite and every manual note.

Each table maps a name in a Horovod, Keras 2 or TF 1 script to its tfring / Keras 3
replacement. A value of ``None`` in a rename table means "no equivalent": the tool leaves
the text alone and prints the reason next to the line. docs/migrating.md shows the same
tables to readers; tests/test_migrate_rules.py keeps the two in step.
"""

from tfring._migrate import tf1_names

# Horovod modules -> tfring modules (longest prefix wins). Imports and dotted uses
# (``horovod.tensorflow.allreduce``) are both rewritten.
MODULES = {
    "horovod.tensorflow.keras.elastic": "tfring.keras.elastic",
    "horovod.keras.elastic": "tfring.keras.elastic",
    "horovod.tensorflow.elastic": "tfring.tensorflow.elastic",
    "horovod.tensorflow.keras.callbacks": "tfring.keras.callbacks",
    "horovod.tensorflow.keras": "tfring.keras",
    "horovod.keras.callbacks": "tfring.keras.callbacks",
    "horovod.keras": "tfring.keras",
    "horovod.tensorflow.compression": "tfring.tensorflow.compression",
    # Horovod's implementation modules whose names tfring.tensorflow exports itself
    "horovod.tensorflow.mpi_ops": "tfring.tensorflow",
    "horovod.tensorflow.functions": "tfring.tensorflow",
    "horovod.tensorflow.sync_batch_norm": "tfring.tensorflow",
    "horovod.tensorflow": "tfring.tensorflow",
    # issue 42: horovod.spark.run, and the tf.data compute service (also under its old path)
    "horovod.spark": "tfring.spark",
    "horovod.tensorflow.data.compute_service": "tfring.tensorflow.data.compute_service",
    "horovod.tensorflow.data.compute_worker": "tfring.tensorflow.data.compute_worker",
    "horovod.tensorflow.compute_service": "tfring.tensorflow.data.compute_service",
    # the compute job on Spark executors: `python -m` / spark-submit of its file, as Horovod's
    "horovod.spark.tensorflow.compute_worker": "tfring.spark.compute_worker",
    # horovod.ray's RayExecutor is tfring.ray's (Horovod 0.28's constructor, create_settings, start/run/
    # execute/shutdown; docs/engines.md)
    "horovod.ray": "tfring.ray",
}

# Names imported from the top-level ``horovod`` package and their tfring module:
# ``from horovod import run`` -> ``from tfring import run`` (issue 42).
HOROVOD_TOP_LEVEL = {"run": "tfring"}

_RAY_ELASTIC = ("tfring.ray has no ElasticRayExecutor: RayExecutor runs a fixed-size job. For elastic "
                "training on Ray use tfring.ray.TfringTrainer with FailureConfig(max_failures=N) (Ray restarts "
                "the worker group), or tfringrun --min-np/--max-np off Ray (docs/engines.md, docs/elastic.md)")

# Horovod modules with no tfring counterpart, and what to do instead.
#
# How the two tables combine (python_source.module_rule): for a module name, the LONGEST key
# of MODULES and UNSUPPORTED_MODULES that is the name or a dotted prefix of it decides. So a
# row here for a subpackage (``horovod.tensorflow.data``) overrides its parent's rewrite
# (``horovod.tensorflow``), and a longer MODULES row (``horovod.tensorflow.data.X``) overrides
# it again: adding a rewrite for a new tfring module is one MODULES row, and
# tests/test_migrate_rules.py imports every MODULES value, so a rewrite to a module that does
# not exist fails there. An import whose rewritten module has no file in tfring (a Horovod
# submodule no row names) is left as it is and listed, never rewritten to a missing module.
UNSUPPORTED_MODULES = {
    "horovod.torch": "tfring is for TensorFlow and Keras; PyTorch scripts keep torch.distributed",
    "horovod.mxnet": "tfring is for TensorFlow and Keras",
    "horovod.spark.keras": ("tfring.spark has run() (horovod.spark.run) but no Estimators: call "
                            "tfring.spark.run(train_fn, num_proc=N) with a function that fits the model"),
    "horovod.spark.torch": "tfring is for TensorFlow and Keras",
    "horovod.spark.lightning": "tfring is for TensorFlow and Keras",
    "horovod.spark.common": ("Horovod's Spark Estimator internals have no tfring module: tfring.spark.run(fn, "
                             "num_proc=N) runs a training function (docs/engines.md, 'Spark')"),
    "horovod.ray.ElasticRayExecutor": _RAY_ELASTIC,
    "horovod.ray.elastic": _RAY_ELASTIC,
    "horovod.ray.elastic_v2": _RAY_ELASTIC,
    "horovod.ray.strategy": ("Horovod's Ray placement strategies have no tfring module: RayExecutor places "
                             "num_workers=N (PACK) or num_hosts=H x num_workers_per_host=K (STRICT_SPREAD) "
                             "itself, as Horovod's does (docs/engines.md)"),
    "horovod.spark.tensorflow": (
        "Horovod's horovod.spark.tensorflow has no tfring package (there is no tfring.spark.tensorflow): its "
        "compute_worker, the tf.data compute job on Spark executors, is tfring.spark.compute_worker (`python -m "
        "tfring.spark.compute_worker <config.json> [--dispatchers D] [--dispatcher-side compute|training]`, or "
        "spark-submit of its file); the training job reads the same config file (docs/migrating.md, the tf.data "
        "compute service)"),
    "horovod.tensorflow.data": (
        "tfring's tf.data service helpers are in tfring.tensorflow.data.compute_service (TfDataServiceConfig, "
        "tf_data_service, send_to_data_service, compute_worker_fn) and tfring.tensorflow.data.compute_worker; "
        "without a data service, give each rank its own shard with dataset.shard(tfring.size(), tfring.rank())"),
    "horovod.runner": (
        "Horovod's launcher internals have no tfring module. Before tfring.init(), a rank's identity "
        "is in tfringrun's environment: int(os.environ['TFRING_RANK']), int(os.environ['TFRING_SIZE']) "
        "(also TFRING_LOCAL_RANK / TFRING_LOCAL_SIZE), e.g. for env.get_env_rank_and_size(); after "
        "init(), tfring.rank() and tfring.size(); the launcher itself is tfringrun (docs/launcher.md)"),
    "horovod.common": ("Horovod's internal helpers have no tfring module: tfring.rank(), tfring.size(), "
                       "tfring.errors (its exceptions), tfring.config()"),
}

# Keras 2 optimizer keyword arguments that Keras 3 renamed.
OPTIMIZER_CLASSES = frozenset({
    "SGD", "Adam", "AdamW", "Adadelta", "Adagrad", "Adamax", "Nadam", "RMSprop", "Ftrl", "Lion", "Adafactor",
    "LossScaleOptimizer",
})
OPTIMIZER_KEYWORDS = {"lr": "learning_rate"}
OPTIMIZER_REMOVED_KEYWORDS = {
    "decay": "Keras 3 optimizers have no `decay`; the same schedule is learning_rate="
             "keras.optimizers.schedules.InverseTimeDecay(<lr>, decay_steps=1, decay_rate=<decay>)",
}

# Keras 2's *_generator methods: their positional parameters, in order. Keras 3's fit /
# evaluate / predict take x, y, batch_size, ... positionally, so every argument after the
# generator becomes a keyword of its Keras 2 name (``evaluate_generator(gen, 10)`` ->
# ``evaluate(gen, steps=10)``; as written, 10 would be ``y``).
GENERATOR_PARAMETERS = {
    "fit_generator": ("generator", "steps_per_epoch", "epochs", "verbose", "callbacks", "validation_data",
                      "validation_steps", "validation_freq", "class_weight", "max_queue_size", "workers",
                      "use_multiprocessing", "shuffle", "initial_epoch"),
    "evaluate_generator": ("generator", "steps", "callbacks", "max_queue_size", "workers", "use_multiprocessing",
                           "verbose"),
    "predict_generator": ("generator", "steps", "callbacks", "max_queue_size", "workers", "use_multiprocessing",
                          "verbose"),
}

# Method calls renamed in Keras 3 (their arguments stay as they are, but see
# GENERATOR_PARAMETERS).
METHODS = {
    "fit_generator": "fit",
    "evaluate_generator": "evaluate",
    "predict_generator": "predict",
    "reset_states": "reset_state",
}

# `x.variables()` (Keras 2 optimizer method) is the property `x.variables` in Keras 3.
CALL_TO_PROPERTY = {"variables"}

# Keyword arguments Keras 3 removed from Model methods. They only tuned how Keras 2 ran
# (tf.function placement, data-loading threads), so dropping them keeps the model the same.
MODEL_METHOD_REMOVED_KEYWORDS = {
    "compile": {
        "experimental_run_tf_function": "Keras 3 always traces train_step with tf.function (run_eagerly=True "
                                        "turns it off)",
    },
    **{method: {
        "workers": "moved to keras.utils.PyDataset(workers=...)",
        "use_multiprocessing": "moved to keras.utils.PyDataset(use_multiprocessing=...)",
        "max_queue_size": "moved to keras.utils.PyDataset(max_queue_size=...)",
    } for method in ("fit", "evaluate", "predict", "fit_generator", "evaluate_generator", "predict_generator")},
}

# `tf.distribute` strategies a RingStrategy replaces (one process per GPU or CPU slot).
STRATEGIES = frozenset({
    "tensorflow.distribute.MultiWorkerMirroredStrategy",
    "tensorflow.distribute.experimental.MultiWorkerMirroredStrategy",
    "tensorflow.distribute.MirroredStrategy",
})

# Horovod DistributedOptimizer keywords tfring does not take.
DISTRIBUTED_OPTIMIZER_UNSUPPORTED_KEYWORDS = {
    "num_groups": "tfring fuses by size (TFRING_FUSION_THRESHOLD), not by groups: drop it",
    "groups": "tfring fuses by size (TFRING_FUSION_THRESHOLD), not by groups: drop it",
    "scale_local_gradients": "tfring.keras.DistributedOptimizer takes it (local variables: register_local_var); "
                             "the TF1 tfring.tensorflow.DistributedOptimizer has no local variables: drop it there",
}

# Fully qualified names that no longer exist in TF 2.21 / Keras 3, and the manual fix.
_TF1 = ("TF1 API: run tf_upgrade_v2 (installed with TensorFlow) to move it to tf.compat.v1; tfring.tensorflow "
        "runs TF1 graph code (examples/tf1_monitored_session.py), or port it to TF2")
REMOVED_API = {
    "tensorflow.ConfigProto": _TF1 + "; for GPU pinning alone, delete the ConfigProto/Session lines and call "
                              "hvd.pin_gpu()",
    "tensorflow.Session": _TF1,
    "tensorflow.placeholder": _TF1,
    "tensorflow.layers": "tf.layers is gone, and tf.compat.v1.layers (what tf_upgrade_v2 writes) fails under "
                         "Keras 3 ('`dense` is not available with Keras 3'): build the model from keras.layers",
    "tensorflow.enable_eager_execution": "TF 2 runs eagerly from the start: delete the line",
    "tensorflow.app": "tf.app is gone: call main() directly (or absl.app.run(main); tf.compat.v1.app.run "
                      "still works)",
    "tensorflow.train.MonitoredTrainingSession": _TF1,
    "tensorflow.contrib": "tf.contrib is gone since TF 2.0",
    "tensorflow.estimator": "tf.estimator is gone (TF 2.16): port to keras.Model.fit or a custom loop "
                            "under tfring.RingStrategy",
    "keras.backend.set_session": "Keras 3 has no sessions: delete the line (pin GPUs with hvd.pin_gpu())",
    "keras.backend.get_session": "Keras 3 has no sessions: delete the line",
    "keras.backend.get_value": "Keras 3: read a variable with float(v) or v.numpy(), "
                               "e.g. float(model.optimizer.learning_rate)",
    "keras.backend.set_value": "Keras 3: assign a variable with v.assign(value), "
                               "e.g. model.optimizer.learning_rate.assign(value)",
    "tensorflow.distribute.cluster_resolver.TFConfigClusterResolver": "tfringrun gives each worker its "
                                                                      "rank: delete the TF_CONFIG resolver",
}
# tf.keras.X is keras.X in TF 2.21: every keras.* entry also matches tensorflow.keras.*.
REMOVED_API.update({"tensorflow." + k: v for k, v in list(REMOVED_API.items()) if k.startswith("keras.")})

# K.get_value(v) / K.set_value(v, x): rewritten to v.numpy() / v.assign(x) (python_source.py).
BACKEND_VALUE_CALLS = frozenset({
    prefix + "keras.backend." + name for prefix in ("", "tensorflow.") for name in ("get_value", "set_value")})

# Keras 3 dropped Keras 2's image-augmentation API from keras.preprocessing.image, but
# tf.keras.preprocessing.image keeps it (keras.src.legacy), and it feeds Model.fit: a script
# that imported these from keras.preprocessing.image imports them from tensorflow.keras.
LEGACY_IMAGE_MODULE = "keras.preprocessing.image"
LEGACY_IMAGE_REPLACEMENT = "tensorflow.keras.preprocessing.image"
LEGACY_IMAGE_NAMES = frozenset({
    "ImageDataGenerator", "DirectoryIterator", "Iterator", "NumpyArrayIterator", "apply_affine_transform",
    "apply_brightness_shift", "apply_channel_shift", "random_brightness", "random_channel_shift",
    "random_rotation", "random_shear", "random_shift", "random_zoom",
})
for _name in LEGACY_IMAGE_NAMES:
    REMOVED_API[f"{LEGACY_IMAGE_MODULE}.{_name}"] = (
        f"Keras 3's keras.preprocessing.image has no {_name}; tf.keras.preprocessing.image keeps it "
        f"(Keras 2's version): use tf.keras.preprocessing.image.{_name}, or move to "
        "keras.utils.image_dataset_from_directory and keras.layers.Random* augmentation layers")


def removed_api_fix(qualified):
    """The manual fix for a fully qualified name that TF 2.21 / Keras 3 no longer has, or
    None. Besides ``REMOVED_API``: every TF 1 name that only ``tf.compat.v1`` still has."""
    fix = REMOVED_API.get(qualified)
    if fix is not None or not qualified.startswith("tensorflow."):
        return fix
    parts = qualified.split(".")
    if len(parts) == 2 and parts[1] in tf1_names.ROOT:
        return f"gone from TF 2: {_TF1} (tf.compat.v1.{parts[1]})"
    if len(parts) == 3 and parts[1] == "train" and parts[2] in tf1_names.TRAIN:
        if parts[2].endswith("Optimizer"):
            return (f"TF1 optimizer, gone from TF 2: in TF 2 code use a Keras optimizer "
                    f"(keras.optimizers.SGD/Adam/...(learning_rate=...)); TF1 graph code keeps "
                    f"tf.compat.v1.train.{parts[2]} (tf_upgrade_v2 makes that edit)")
        return f"gone from TF 2: {_TF1} (tf.compat.v1.train.{parts[2]})"
    if len(parts) == 3 and parts[1] == "losses" and parts[2] in tf1_names.LOSSES:
        return (f"TF1 loss function, gone from TF 2 (tf.losses is keras.losses there): use a Keras loss "
                f"(e.g. keras.losses.SparseCategoricalCrossentropy() for sparse_softmax_cross_entropy); "
                f"TF1 graph code keeps tf.compat.v1.losses.{parts[2]}")
    return None


# `horovod.run(fn, np=...)` starts the workers from Python: `tfring.run` takes the same
# arguments (issue 42). When `import horovod` serves only `horovod.run(...)`, it becomes
# `import tfring` and each call `tfring.run(...)`; `from horovod import run` becomes
# `from tfring import run` (HOROVOD_TOP_LEVEL). Otherwise the call is listed.
HOROVOD_RUN = ("horovod.run(fn, np=...) -> tfring.run(fn, np=...), same arguments (docs/launcher.md, 'From "
               "Python'): import tfring and call tfring.run")
HOROVOD_RUN_REWRITTEN = ("horovod.run(...) -> tfring.run(...): same arguments; fn's results come back by rank "
                         "(docs/launcher.md, 'From Python')")

# Reading TF_CONFIG: tfringrun does not set it.
TF_CONFIG_READ = ("reads TF_CONFIG, which tfringrun does not set (KeyError / None under tfringrun): "
                  "after tfring.init() (tfring.RingStrategy() calls it) the number of workers is tfring.size() "
                  "(or strategy.num_replicas_in_sync), this worker's index tfring.rank(), and rank 0 is the "
                  "chief; before init(), tfringrun's TFRING_SIZE / TFRING_RANK environment variables give the "
                  "same in a fixed-size job")
# strategy.cluster_resolver.task_type / task_id: they work under RingStrategy (advice only).
CLUSTER_RESOLVER = ("under tfring.RingStrategy, cluster_resolver.task_type is 'worker' and task_id is "
                    "tfring.rank(); rank 0 is the chief (TF's `task_type == 'worker' and task_id == 0` test "
                    "holds there)")

# Environment variables: Horovod name -> tfring name, or None with the reason.
ENVIRONMENT = {
    "HOROVOD_RANK": "TFRING_RANK",
    "HOROVOD_SIZE": "TFRING_SIZE",
    "HOROVOD_LOCAL_RANK": "TFRING_LOCAL_RANK",
    "HOROVOD_LOCAL_SIZE": "TFRING_LOCAL_SIZE",
    "HOROVOD_CROSS_RANK": "TFRING_CROSS_RANK",
    "HOROVOD_CROSS_SIZE": "TFRING_CROSS_SIZE",
    "HOROVOD_FUSION_THRESHOLD": "TFRING_FUSION_THRESHOLD",
    "HOROVOD_CYCLE_TIME": "TFRING_CYCLE_TIME_MS",
    "HOROVOD_CACHE_CAPACITY": "TFRING_CACHE_CAPACITY",
    "HOROVOD_TIMELINE": "TFRING_TIMELINE",
    "HOROVOD_LOG_LEVEL": "TFRING_LOG_LEVEL",
    "HOROVOD_STALL_CHECK_TIME_SECONDS": "TFRING_STALL_WARNING_S",
    "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "TFRING_STALL_SHUTDOWN_S",
    "HOROVOD_GLOO_TIMEOUT_SECONDS": "TFRING_TIMEOUT_S",
    "HOROVOD_START_TIMEOUT": "TFRING_START_TIMEOUT_S",
    "HOROVOD_STALL_CHECK_DISABLE": None,
    "HOROVOD_HIERARCHICAL_ALLREDUCE": "TFRING_HIERARCHICAL_ALLREDUCE",
    "HOROVOD_HIERARCHICAL_ALLGATHER": "TFRING_HIERARCHICAL_ALLGATHER",
    "HOROVOD_AUTOTUNE": "TFRING_AUTOTUNE",
    "HOROVOD_AUTOTUNE_LOG": "TFRING_AUTOTUNE_LOG",
    "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": "TFRING_AUTOTUNE_WARMUP_SAMPLES",
    "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": "TFRING_AUTOTUNE_STEPS_PER_SAMPLE",
    "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": "TFRING_AUTOTUNE_MAX_SAMPLES",
    "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE": None,
    "HOROVOD_GPU_OPERATIONS": None,
    "HOROVOD_CPU_OPERATIONS": None,
    "HOROVOD_CONTROLLER": None,
    "HOROVOD_MPI_THREADS_DISABLE": None,
    "HOROVOD_TIMELINE_MARK_CYCLES": None,
    "HOROVOD_NUM_NCCL_STREAMS": None,
    "HOROVOD_ENABLE_XLA_OPS": None,
    "HOROVOD_DISABLE_GROUP_FUSION": None,
}
ENVIRONMENT_REASONS = {
    "HOROVOD_STALL_CHECK_DISABLE": "set TFRING_STALL_WARNING_S=0 instead",
    "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE": "tfring's autotuner searches candidates one setting at a time, "
                                               "without a Gaussian process; its guard against noise is "
                                               "TFRING_AUTOTUNE_MIN_GAIN",
    "HOROVOD_GPU_OPERATIONS": "tfring uses NCCL on GPUs and its own ring on CPUs",
    "HOROVOD_CPU_OPERATIONS": "tfring uses its own TCP / shared-memory ring on CPUs",
    "HOROVOD_CONTROLLER": "tfring negotiates over its own control channel",
    "HOROVOD_MPI_THREADS_DISABLE": "tfring does not use MPI for collectives",
    "HOROVOD_TIMELINE_MARK_CYCLES": "tfring's timeline has no cycle markers",
    "HOROVOD_NUM_NCCL_STREAMS": "tfring uses one NCCL stream per rank",
    "HOROVOD_ENABLE_XLA_OPS": "not needed: tfring's collectives compile with XLA without a switch "
                              "(XLA:CPU and XLA:GPU; the CUDA handlers are compile- and fake-GPU-tested only)",
    "HOROVOD_DISABLE_GROUP_FUSION": "tfring fuses by size, not by groups",
}

# horovodrun options: name -> (takes a value, tfringrun option or None). None means the
# option is dropped: it only chose among Horovod's own machinery, which tfring replaces.
LAUNCHER_OPTIONS = {
    "-np": (True, "-np"), "--num-proc": (True, "-np"),
    "-H": (True, "-H"), "--hosts": (True, "-H"),
    "-hostfile": (True, "--hostfile"), "--hostfile": (True, "--hostfile"),
    "-p": (True, "--ssh-port"), "--ssh-port": (True, "--ssh-port"),
    "-i": (True, "--ssh-identity-file"), "--ssh-identity-file": (True, "--ssh-identity-file"),
    "--network-interface": (True, "--network-interface"),
    "--output-filename": (True, "--output-filename"),
    "--verbose": (False, "--verbose"),
    "--check-build": (False, "--check-build"),
    "--fusion-threshold-mb": (True, "--fusion-threshold-mb"),
    "--cycle-time-ms": (True, "--cycle-time-ms"),
    "--timeline-filename": (True, "--timeline-filename"),
    "--start-timeout": (True, "--start-timeout"),
    "--log-level": (True, "--log-level"),
    "--stall-check-warning-time-seconds": (True, "--stall-warning-s"),
    "--stall-check-shutdown-time-seconds": (True, "--stall-shutdown-s"),
    "--gloo": (False, None), "--mpi": (False, None), "--tcp": (False, None),
    "--autotune": (False, "--autotune"),
    "--autotune-log-file": (True, "--autotune-log-file"),
    "--hierarchical-allreduce": (False, None), "--no-hierarchical-allreduce": (False, None),
    "--hierarchical-allgather": (False, None), "--no-hierarchical-allgather": (False, None),
    "--mpi-threads-disable": (False, None),
    "--min-np": (True, "--min-np"), "--max-np": (True, "--max-np"),
    "--host-discovery-script": (True, "--host-discovery-script"), "--slots": (True, "--slots"),
    "--elastic-timeout": (True, "--elastic-timeout"), "--reset-limit": (True, "--reset-limit"),
}
# Options with no tfringrun counterpart that matter: the line is left unchanged.
LAUNCHER_UNSUPPORTED_OPTIONS = {
    "--no-stall-check": "use --stall-warning-s 0",
    "--disable-cache": "set TFRING_CACHE_CAPACITY=0 in the environment",
    "--cache-capacity": "set TFRING_CACHE_CAPACITY in the environment",
    "--mpi-args": "tfringrun does not start MPI; launch with mpirun directly if you need its options",
    "-x": "tfringrun passes the launcher's whole environment to local workers; export the variable",
    "--binding-args": "use tfringrun --bind-to core|socket|numa|none",
}

# `tf.distribute` strategy -> RingStrategy: what to say about launching. TF_CONFIG is read only
# by MultiWorkerMirroredStrategy (and by scripts that read it themselves); MirroredStrategy
# ran every GPU of one machine from one process and never read it.
STRATEGY_LAUNCH_MULTI_WORKER = "launch with tfringrun, which replaces TF_CONFIG"
STRATEGY_LAUNCH_MIRRORED = ("launch with `tfringrun -np N python <script>`: one process per GPU (or CPU slot) "
                            "takes the place of MirroredStrategy's devices in one process")

# Keras 3 saving and loading: calls that fail in one plain process too (python_source.py
# lists them with the Keras 3 replacement; nothing is rewritten: the right one depends on
# what the file is for).
KERAS_SAVE_SUFFIXES = (".keras", ".h5", ".hdf5")  # model.save / save_model
CHECKPOINT_SUFFIXES = (".keras", ".h5")  # ModelCheckpoint (save_weights_only=True: WEIGHTS_SUFFIX)
WEIGHTS_SUFFIX = ".weights.h5"  # model.save_weights
SAVE_WITHOUT_SUFFIX = ("Keras 3's model.save writes only a .keras file (or a legacy .h5) and raises ValueError for "
                       "a path without that suffix (TF 2's SavedModel directory): save to '<name>.keras', or for "
                       "a SavedModel use model.export(path) (for serving) or tf.saved_model.save(model, path)")
SAVE_WEIGHTS_WITHOUT_SUFFIX = (
    "Keras 3's save_weights writes only a .weights.h5 file and raises ValueError ('The filename must end in "
    "`.weights.h5`') for any other path (a TF checkpoint prefix in TF 2): save to '<name>.weights.h5' and "
    "load_weights from it, or for a TF checkpoint use tf.train.Checkpoint(model=model).save(prefix)")
CHECKPOINT_WITHOUT_SUFFIX = (
    "Keras 3's ModelCheckpoint checks its filepath when it is built and raises ValueError ('The filepath provided "
    "must end in `.keras`') unless it ends in .keras (or .h5): name it like 'checkpoint-{epoch}.keras'")
CHECKPOINT_WEIGHTS_WITHOUT_SUFFIX = (
    "Keras 3's ModelCheckpoint(save_weights_only=True) raises ValueError when it is built unless its filepath "
    "ends in .weights.h5 (a TF checkpoint prefix in TF 2): name it like 'checkpoint-{epoch}.weights.h5'")
SAVE_FILE_OBJECT = (
    "Keras 3's model.save / save_weights take a path, not an open file: an h5py.File or file object (which Keras 2 "
    "wrote into) raises ValueError, since its str() ends in neither .keras nor .h5 ('Invalid filepath extension "
    "for saving'; save_weights: 'The filename must end in `.weights.h5`'). Pass the path instead: "
    "model.save('model.keras') (or 'model.h5' for HDF5), model.save_weights('model.weights.h5'); to put the "
    "model inside a larger HDF5 file, save to a .h5 path and copy it in with h5py (Group.copy)")
# Calls whose result is an open file (kinds the script binds, python_source._Bindings).
FILE_OBJECT_CALLS = frozenset({"h5py.File", "builtins.open", "io.open", "io.BytesIO", "tensorflow.io.gfile.GFile"})
SAVE_OPTIONS = ("Keras 3's model.save / keras.models.save_model take no options= (tf.saved_model.SaveOptions): "
                "a .keras file needs none; for a SavedModel with options use "
                "tf.saved_model.save(model, path, options=...)")
LOAD_OPTIONS = ("Keras 3's keras.models.load_model takes no options= (tf.saved_model.LoadOptions): load a .keras "
                "file without them; for a SavedModel directory use tf.saved_model.load(path, options=...) or "
                "keras.layers.TFSMLayer(path, call_endpoint='serving_default')")
SAVE_SPEC = ("Keras 3 models have no save_spec(): build the signature from the model's inputs, e.g. "
             "[tf.TensorSpec(i.shape, i.dtype) for i in model.inputs]")
HUB_KERAS_LAYER = ("tensorflow_hub.KerasLayer is a Keras 2 (tf_keras) layer and fails inside a Keras 3 model: "
                   "for a SavedModel directory use keras.layers.TFSMLayer(path, call_endpoint='serving_default'), "
                   "or load a .keras file with keras.models.load_model")
H5_RESUME = ("resuming from a .h5 file: Keras 3 loads a .h5 model's optimizer without its slot variables, while a "
             "fresh optimizer builds them, so the ranks of a resumed job disagree on the optimizer's variables "
             "(MismatchError at the first broadcast of the model state): write checkpoints as .keras "
             "(ModelCheckpoint('checkpoint-{epoch}.keras')) and resume from those")
# Where those calls live (qualified names as the script's imports resolve them).
KERAS_SAVE_FUNCTIONS = frozenset({
    prefix + name for prefix in ("", "tensorflow.")
    for name in ("keras.models.save_model", "keras.saving.save_model")})
KERAS_LOAD_OWNERS = ("keras.", "tensorflow.keras.", "horovod.", "tfring.")  # keras..., hvd.load_model
HUB_KERAS_LAYERS = frozenset({"tensorflow_hub.KerasLayer", "tensorflow_hub.keras_layer.KerasLayer"})
# Receivers whose .save(prefix) is a TF checkpoint (a prefix, no suffix), never a Keras model's.
CHECKPOINT_CLASSES = frozenset({
    "tensorflow.train.Checkpoint", "tensorflow.train.CheckpointManager", "tensorflow.compat.v1.train.Saver",
    "tensorflow.compat.v1.train.Checkpoint"})

# Keras callbacks that watch a metric (keras.src.callbacks.monitor_callback.MonitorCallback):
# class -> (position of monitor, position of mode) among their positional parameters.
MONITOR_CALLBACKS = {"ReduceLROnPlateau": (0, 4), "EarlyStopping": (0, 4), "ModelCheckpoint": (1, 5)}
# Keras 3.15's mode="auto" (MonitorCallback._set_monitor_op) takes the direction from the monitored
# name without its "val_" prefix: "loss" is minimized; any other name must be a metric compiled
# into the model whose class declares a direction (_direction "up" or "down"), else the callback
# raises ValueError at the end of the first epoch. The names Keras' own metrics log under
# (compile(metrics=[...]) strings and default names; tests check each against Keras):
KERAS_DIRECTED_METRICS = frozenset({
    "loss", "acc", "accuracy", "binary_accuracy", "categorical_accuracy", "sparse_categorical_accuracy",
    "top_k_categorical_accuracy", "sparse_top_k_categorical_accuracy", "auc", "precision", "recall", "f1_score",
    "mean_squared_error", "mse", "mean_absolute_error", "mae", "mean_absolute_percentage_error", "mape",
    "mean_squared_logarithmic_error", "msle", "root_mean_squared_error", "r2_score", "log_cosh_error",
    "binary_crossentropy", "categorical_crossentropy", "sparse_categorical_crossentropy", "kl_divergence",
    "poisson", "hinge", "squared_hinge", "categorical_hinge", "cosine_similarity", "pearson_correlation",
    "concordance_correlation",
})
MONITOR_AUTO_MODE = (
    "without mode=, Keras 3 (mode='auto') takes the direction only from the name 'loss' (with or without 'val_') "
    "and from a compiled Keras metric of that name that declares one (accuracy, auc, mae, ...); for any other "
    "name (a custom metric function or class, a value a train_step or callback logs, a per-output loss such as "
    "'dense_loss') it raises ValueError at the end of the first epoch ('Keras isn't able to automatically "
    "determine whether that metric should be maximized or minimized'), in one process too, where Keras 2 "
    "guessed from the name (max for names with 'acc' in them, min for most others): pass mode='max' for a score that should rise "
    "(f1, auc, ...) or mode='min' for an error or loss")
