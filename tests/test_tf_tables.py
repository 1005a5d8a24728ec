"""The TF side's vocabulary is the core's (issue 29): the element types the TF ops accept,
the tf.errors class of every core error code, and the reduce-op names all come from the
core's exported tables (tfring._core). Each test fails when one side changes without the
other. One process, no job: ~6 s, most of it importing TensorFlow."""

import pytest

tf = pytest.importorskip("tensorflow")

from tfring import _core
from tfring import _errors as np_errors
from tfring._tensorflow import errors as tf_errors
from tfring._tensorflow import mpi_ops
from tfring._tensorflow._loader import op_library

# ARCHITECTURE.md section 3: core error code -> tf.errors class.
EXPECTED_TF_ERRORS = {
    "INVALID_ARGUMENT": tf.errors.InvalidArgumentError,
    "MISMATCH": tf.errors.FailedPreconditionError,
    "FAILED_PRECONDITION": tf.errors.FailedPreconditionError,
    "PEER_LOST": tf.errors.UnavailableError,
    "TIMEOUT": tf.errors.DeadlineExceededError,
    "UNIMPLEMENTED": tf.errors.UnimplementedError,
    "INTERNAL": tf.errors.InternalError,
    "ABORTED": tf.errors.AbortedError,
}


def _typed_op_defs():
    """{op name: OpDef} of every tfring op with a type attr, built in a graph (no kernel runs)."""
    lib = op_library()
    with tf.Graph().as_default():
        x = tf.ones([2, 2])
        built = [lib.tfring_allreduce(x, tensor_name="t", reduce_op=0),
                 lib.tfring_grouped_allreduce([x], tensor_names=["t"], reduce_op=0)[0],
                 lib.tfring_allgather(x, tensor_name="t"),
                 lib.tfring_broadcast(x, tensor_name="t", root_rank=0),
                 lib.tfring_alltoall(x, tf.constant([], tf.int32), tensor_name="t")[0],
                 lib.tfring_reducescatter(x, tensor_name="t", reduce_op=0)]
        return {t.op.type: t.op.op_def for t in built}


def test_every_typed_op_accepts_exactly_the_core_types():
    core_types = set(_core.data_types())
    for name, op_def in _typed_op_defs().items():
        (attr,) = [a for a in op_def.attr if a.name == "T"]
        accepted = {tf.dtypes.as_dtype(t).name for t in attr.allowed_values.list.type}
        assert accepted == core_types, f"{name} accepts {sorted(accepted)}, the core {sorted(core_types)}"


def test_tf_errors_of_every_core_code_follow_the_core_table():
    codes = _core.error_codes()
    assert set(codes) == set(EXPECTED_TF_ERRORS), "a core error code has no row in ARCHITECTURE.md section 3"
    canonical = _core.canonical_error_codes()  # the table the TF kernels map with (ToTfStatus)
    for name, expected in EXPECTED_TF_ERRORS.items():
        assert canonical[name] == expected(None, None, "").error_code, name
        # The NumPy API's exceptions, re-raised by tfring.tensorflow, land on the same class.
        exc = np_errors.from_code(codes[name], "boom")
        assert type(tf_errors.to_tf_error(exc)) is expected, name


def test_kernels_map_core_errors_and_reduce_op_names_from_the_core():
    assert mpi_ops._OP_NAMES == {value: name for name, value in _core.reduce_ops().items()}
    assert {mpi_ops.Sum, mpi_ops.Average, mpi_ops.Min, mpi_ops.Max, mpi_ops.Product,
            mpi_ops.Adasum} == set(_core.reduce_ops().values())
    lib = op_library()
    # A reduce op outside the core's table: refused by the kernel, naming every valid one.
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        lib.tfring_allreduce(tf.ones([2]), tensor_name="tables.bad_op", reduce_op=len(_core.reduce_ops()))
    for name, value in _core.reduce_ops().items():
        assert f"{name}({value})" in info.value.message
    # A core FAILED_PRECONDITION (no job yet) through ToTfStatus.
    assert not _core.is_initialized()
    with pytest.raises(EXPECTED_TF_ERRORS["FAILED_PRECONDITION"], match="not initialized"):
        lib.tfring_allreduce(tf.ones([2]), tensor_name="tables.no_job", reduce_op=0)
