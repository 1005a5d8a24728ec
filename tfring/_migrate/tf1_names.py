"""Names TF 1.x scripts use that TF 2.21 no longer has under ``tf.``.

Generated from TensorFlow 2.21: every public name of ``tf.compat.v1`` (and of its ``train``
and ``losses`` modules) that ``tf`` (``tf.train``, ``tf.losses``) lacks. Each still exists as
``tf.compat.v1.<name>``. tests/test_migrate_rules.py checks the table against the installed
TensorFlow, so a TensorFlow upgrade that changes it fails there.
"""

# tf.X
ROOT = frozenset({
    "AUTO_REUSE", "AttrValue", "COMPILER_VERSION", "CXX11_ABI_FLAG", "CXX_VERSION",
    "ConditionalAccumulator", "ConditionalAccumulatorBase", "ConfigProto", "Dimension", "Event",
    "FIFOQueue", "FixedLenFeature", "FixedLenSequenceFeature", "FixedLengthRecordReader", "GIT_VERSION",
    "GPUOptions", "GRAPH_DEF_VERSION", "GRAPH_DEF_VERSION_MIN_CONSUMER", "GRAPH_DEF_VERSION_MIN_PRODUCER",
    "GraphDef", "GraphKeys", "GraphOptions", "HistogramProto", "IdentityReader", "InteractiveSession",
    "LMDBReader", "LogMessage", "MONOLITHIC_BUILD", "MetaGraphDef", "NameAttrList", "NoGradient", "NodeDef",
    "NotDifferentiable", "OpError", "OptimizerOptions", "PaddingFIFOQueue", "Print", "PriorityQueue",
    "QUANTIZED_DTYPES", "QueueBase", "RandomShuffleQueue", "ReaderBase", "RunMetadata", "RunOptions",
    "Session", "SessionLog", "SparseConditionalAccumulator", "SparseFeature", "SparseTensorValue",
    "Summary", "SummaryMetadata", "TFRecordReader", "TensorInfo", "TextLineReader", "VERSION",
    "VarLenFeature", "VariableScope", "WholeFileReader", "accumulate_n", "add_check_numerics_ops",
    "add_to_collection", "add_to_collections", "all_variables", "angle", "app", "arg_max", "arg_min",
    "assert_greater_equal", "assert_integer", "assert_less_equal", "assert_near", "assert_negative",
    "assert_non_negative", "assert_non_positive", "assert_none_equal", "assert_positive",
    "assert_proper_iterable", "assert_rank_at_least", "assert_rank_in", "assert_same_float_dtype",
    "assert_scalar", "assert_type", "assert_variables_initialized", "assign", "assign_add", "assign_sub",
    "batch_gather", "batch_scatter_update", "batch_to_space_nd", "betainc", "bincount", "ceil",
    "check_numerics", "cholesky", "cholesky_solve", "clip_by_average_norm", "colocate_with",
    "confusion_matrix", "conj", "container", "control_flow_v2_enabled",
    "convert_to_tensor_or_indexed_slices", "convert_to_tensor_or_sparse_tensor", "count_nonzero",
    "count_up_to", "create_partitioned_variables", "cross", "cumprod", "decode_base64", "decode_compressed",
    "decode_csv", "decode_json_example", "decode_raw", "delete_session_tensor", "depth_to_space",
    "dequantize", "deserialize_many_sparse", "diag", "diag_part", "digamma", "dimension_at_index",
    "dimension_value", "disable_control_flow_v2", "disable_eager_execution", "disable_resource_variables",
    "disable_tensor_equality", "disable_v2_behavior", "disable_v2_tensorshape", "distributions", "div",
    "div_no_nan", "enable_control_flow_v2", "enable_eager_execution", "enable_resource_variables",
    "enable_tensor_equality", "enable_v2_behavior", "enable_v2_tensorshape", "encode_base64", "erf", "erfc",
    "executing_eagerly_outside_functions", "expm1", "extract_image_patches", "fake_quant_with_min_max_args",
    "fake_quant_with_min_max_args_gradient", "fake_quant_with_min_max_vars",
    "fake_quant_with_min_max_vars_gradient", "fake_quant_with_min_max_vars_per_channel",
    "fake_quant_with_min_max_vars_per_channel_gradient", "fft", "fft2d", "fft3d", "fixed_size_partitioner",
    "flags", "floor_div", "floordiv", "floormod", "get_collection", "get_collection_ref",
    "get_default_graph", "get_default_session", "get_local_variable", "get_seed", "get_session_handle",
    "get_session_tensor", "get_variable", "get_variable_scope", "gfile", "global_norm", "global_variables",
    "global_variables_initializer", "glorot_normal_initializer", "glorot_uniform_initializer", "ifft",
    "ifft2d", "ifft3d", "igamma", "igammac", "imag", "initialize_all_tables", "initialize_all_variables",
    "initialize_local_variables", "initialize_variables", "invert_permutation", "is_finite", "is_inf",
    "is_nan", "is_non_decreasing", "is_numeric_tensor", "is_strictly_increasing", "is_variable_initialized",
    "layers", "lbeta", "lgamma", "lin_space", "load_file_system_library", "local_variables",
    "local_variables_initializer", "log", "log1p", "log_sigmoid", "logging", "logical_xor", "make_template",
    "manip", "matching_files", "matrix_band_part", "matrix_determinant", "matrix_diag", "matrix_diag_part",
    "matrix_inverse", "matrix_set_diag", "matrix_solve", "matrix_solve_ls", "matrix_transpose",
    "matrix_triangular_solve", "min_max_variable_partitioner", "mixed_precision", "mod", "model_variables",
    "moving_average_variables", "multinomial", "no_regularizer", "op_scope", "orthogonal_initializer",
    "parse_example", "parse_single_example", "parse_single_sequence_example", "parse_tensor", "placeholder",
    "placeholder_with_default", "polygamma", "py_func", "python_io", "qr", "quantize", "quantize_v2",
    "quantized_concat", "random_crop", "random_gamma", "random_normal", "random_poisson", "random_shuffle",
    "random_uniform", "read_file", "real", "reciprocal", "reduce_join", "regex_replace",
    "report_uninitialized_variables", "reset_default_graph", "resource_loader",
    "resource_variables_enabled", "reverse_v2", "rint", "rsqrt", "scatter_add", "scatter_div",
    "scatter_max", "scatter_min", "scatter_mul", "scatter_nd_add", "scatter_nd_sub", "scatter_nd_update",
    "scatter_sub", "scatter_update", "segment_max", "segment_mean", "segment_min", "segment_prod",
    "segment_sum", "self_adjoint_eig", "self_adjoint_eigvals", "serialize_many_sparse", "serialize_sparse",
    "serialize_tensor", "set_random_seed", "setdiff1d", "space_to_depth", "sparse_add", "sparse_concat",
    "sparse_fill_empty_rows", "sparse_mask", "sparse_matmul", "sparse_maximum", "sparse_merge",
    "sparse_minimum", "sparse_placeholder", "sparse_reduce_max", "sparse_reduce_max_sparse",
    "sparse_reduce_sum", "sparse_reduce_sum_sparse", "sparse_reorder", "sparse_reset_shape",
    "sparse_reshape", "sparse_retain", "sparse_segment_mean", "sparse_segment_sqrt_n", "sparse_segment_sum",
    "sparse_slice", "sparse_softmax", "sparse_split", "sparse_tensor_dense_matmul",
    "sparse_tensor_to_dense", "sparse_to_dense", "sparse_to_indicator", "sparse_transpose", "spectral",
    "squared_difference", "string_join", "string_split", "string_strip", "string_to_hash_bucket",
    "string_to_hash_bucket_fast", "string_to_hash_bucket_strong", "string_to_number", "substr", "svd",
    "tables_initializer", "tensor_scatter_add", "tensor_scatter_sub", "tensor_scatter_update",
    "to_bfloat16", "to_complex128", "to_complex64", "to_double", "to_float", "to_int32", "to_int64",
    "trace", "trainable_variables", "truncated_normal", "truncated_normal_initializer",
    "uniform_unit_scaling_initializer", "unsorted_segment_max", "unsorted_segment_mean",
    "unsorted_segment_min", "unsorted_segment_prod", "unsorted_segment_sqrt_n", "unsorted_segment_sum",
    "user_ops", "variable_axis_size_partitioner", "variable_op_scope", "variable_scope",
    "variables_initializer", "variance_scaling_initializer", "verify_tensor_all_finite", "where_v2",
    "wrap_function", "write_file", "zeta"
})

# tf.train.X
TRAIN = frozenset({
    "AdadeltaOptimizer", "AdagradDAOptimizer", "AdagradOptimizer", "AdamOptimizer", "CheckpointSaverHook",
    "CheckpointSaverListener", "ChiefSessionCreator", "FeedFnHook", "FinalOpsHook", "FtrlOptimizer",
    "GlobalStepWaiterHook", "GradientDescentOptimizer", "LoggingTensorHook", "LooperThread",
    "MomentumOptimizer", "MonitoredSession", "MonitoredTrainingSession", "NanLossDuringTrainingError",
    "NanTensorHook", "NewCheckpointReader", "Optimizer", "ProfilerHook", "ProximalAdagradOptimizer",
    "ProximalGradientDescentOptimizer", "QueueRunner", "RMSPropOptimizer", "Saver", "SaverDef", "Scaffold",
    "SecondOrStepTimer", "Server", "SessionCreator", "SessionManager", "SessionRunArgs",
    "SessionRunContext", "SessionRunHook", "SessionRunValues", "SingularMonitoredSession",
    "StepCounterHook", "StopAtStepHook", "SummarySaverHook", "Supervisor", "SyncReplicasOptimizer",
    "VocabInfo", "WorkerSessionCreator", "add_queue_runner", "assert_global_step", "basic_train_loop",
    "batch", "batch_join", "checkpoint_exists", "cosine_decay", "cosine_decay_restarts",
    "create_global_step", "do_quantize_training_on_graphdef", "exponential_decay", "export_meta_graph",
    "generate_checkpoint_state_proto", "get_checkpoint_mtimes", "get_global_step",
    "get_or_create_global_step", "global_step", "import_meta_graph", "init_from_checkpoint",
    "input_producer", "inverse_time_decay", "limit_epochs", "linear_cosine_decay", "match_filenames_once",
    "maybe_batch", "maybe_batch_join", "maybe_shuffle_batch", "maybe_shuffle_batch_join",
    "natural_exp_decay", "noisy_linear_cosine_decay", "piecewise_constant", "piecewise_constant_decay",
    "polynomial_decay", "queue_runner", "range_input_producer", "remove_checkpoint",
    "replica_device_setter", "sdca_fprint", "sdca_optimizer", "sdca_shrink_l1", "shuffle_batch",
    "shuffle_batch_join", "slice_input_producer", "start_queue_runners", "string_input_producer",
    "summary_iterator", "update_checkpoint_state", "warm_start", "write_graph"
})

# tf.losses.X (tf.losses is keras.losses in TF 2: its classes stay, TF1's loss functions are gone)
LOSSES = frozenset({
    "absolute_difference", "add_loss", "compute_weighted_loss", "cosine_distance", "get_losses",
    "get_regularization_loss", "get_regularization_losses", "get_total_loss", "hinge_loss", "huber_loss",
    "log_loss", "mean_pairwise_squared_error", "mean_squared_error", "sigmoid_cross_entropy",
    "softmax_cross_entropy", "sparse_softmax_cross_entropy"
})
