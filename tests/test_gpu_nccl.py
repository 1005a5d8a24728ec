"""The GPU path: the core's NCCL backend driven from the pybind module, without TensorFlow.

Three groups:
  * build (any machine): the NCCL backend is built into libtfring_core.so without any
    link-time CUDA/NCCL dependency; its CUDA/NCCL declarations match the vendor headers
    (when the headers were fetched: ``make gpu-headers``).
  * absence (any machine): with NCCL missing, GPU requests fail at once with
    UnimplementedError saying how to get NCCL, and the runtime keeps working on the CPU.
  * gpu (marker ``gpu``; skipped unless NCCL, the CUDA runtime and a GPU load): every
    collective and fusion on device arrays with ONE rank (NCCL refuses two ranks on one
    GPU), against NumPy; two ranks when the machine has two GPUs.

On a lent GPU machine (no TensorFlow needed), see docs/gpu.md, "Running the GPU test":
    TFRING_WITHOUT_TF=1 python setup.py build_ext --inplace
    python -m pytest -q -m gpu tests/test_gpu_nccl.py
"""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

import tfring
from tfring import _core
from tfring import _errors as errors

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORE_LIB = os.path.join(ROOT, "tfring", "libtfring_core.so")


def _gpu_available():
    info = _core.gpu_info()
    return info["available"], info["detail"]


_AVAILABLE, _DETAIL = _gpu_available()
_SKIP_REASON = "no usable GPU/NCCL here (tfring._basics.gpu.gpu_info() says why)"


# ------------------------------------------------------------------------------ build


def test_nccl_backend_is_built_in_without_link_time_cuda():
    assert tfring.build_info()["nccl"] is True
    assert _core.gpu_info()["built"] is True
    needed = subprocess.run(["readelf", "-d", CORE_LIB], capture_output=True, text=True, check=True).stdout
    assert not [line for line in needed.splitlines() if "NEEDED" in line and ("nccl" in line or "cuda" in line)]
    undefined = subprocess.run(["nm", "-D", "--undefined-only", CORE_LIB], capture_output=True, text=True,
                               check=True).stdout.split()
    assert not [s for s in undefined if s.startswith(("nccl", "cuda"))], "CUDA/NCCL must be dlopen'ed, not linked"
    defined = subprocess.run(["nm", "-DC", "--defined-only", CORE_LIB], capture_output=True, text=True,
                             check=True).stdout
    assert "tfring::gpu::NcclBackend::Execute" in defined


def test_libraries_export_no_private_cxx_runtime():
    # A toolchain that links libstdc++ statically must not leak it out of our libraries:
    # two exported copies in one process disagree on locale ids and crash at the first
    # `ostream << number` (seen with a GPU machine's /opt/gcc; setup.py: --exclude-libs).
    libs = [CORE_LIB, _core.__file__]
    for lib in libs:
        exported = subprocess.run(["nm", "-D", "-C", "--defined-only", lib], check=True, capture_output=True,
                                  text=True).stdout
        leaked = [line for line in exported.splitlines()
                  if re.search(r" (std::locale::|std::ios_base::Init|execute_native_thread_routine|__cxa_throw$)", line)]
        assert not leaked, f"{lib} exports the C++ runtime: {leaked[:5]}"


def test_abi_declarations_match_vendor_headers():
    flags = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gpu_headers.py"), "flags"],
                           check=False, capture_output=True, text=True)
    if flags.returncode != 0:
        pytest.skip("vendor headers not fetched (make gpu-headers)")
    cmd = ["g++", "-std=c++17", "-fsyntax-only", "-I" + os.path.join(ROOT, "cc", "core")] + flags.stdout.split() + [
        os.path.join(ROOT, "cc", "core", "backends", "nccl", "abi_check.cc")]
    result = subprocess.run(cmd, check=False, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]


# ------------------------------------------------------------------------------ absence

_ABSENT_SCRIPT = r"""
import numpy as np, tfring
from tfring import _errors as errors

class FakeGpuArray:
    # Looks like a CuPy array on GPU 0 (host memory behind it; never touched).
    def __init__(self, a): self.a = a
    @property
    def __cuda_array_interface__(self):
        return {"shape": self.a.shape, "typestr": self.a.dtype.str, "data": (self.a.ctypes.data, False),
                "version": 3, "strides": None}
    def __dlpack_device__(self): return (2, 0)

tfring.init()
x = FakeGpuArray(np.arange(6, dtype=np.float32).reshape(3, 2))
calls = {
    "allreduce": lambda: tfring.allreduce(x, name="g.ar"),
    "allgather": lambda: tfring.allgather(x, name="g.ag"),
    "broadcast": lambda: tfring.broadcast(x, 0, name="g.bc"),
    "alltoall": lambda: tfring.alltoall(x, name="g.a2a"),
    "reducescatter": lambda: tfring.reducescatter(x, name="g.rs"),
}
for op, call in calls.items():
    try:
        call()
        print("NO-ERROR", op)
    except errors.UnimplementedError as e:
        print("UNIMPLEMENTED", op, str(e).replace("\n", " | "))
import tfring._basics.gpu
print("INFO", tfring._basics.gpu.gpu_info()["available"])
print("CPU", tfring.allreduce(np.ones(3, np.float32), op=tfring.Sum).tolist())
tfring.shutdown()
"""


def test_gpu_requests_fail_cleanly_without_nccl(tmp_path):
    # A library path that cannot load stands for "NCCL is not installed" on any machine.
    env = dict(os.environ, PYTHONPATH=ROOT, TFRING_NCCL_LIBRARY=str(tmp_path / "libnccl.so.2"))
    out = subprocess.run([sys.executable, "-c", _ABSENT_SCRIPT], env=env, check=False, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    failed = [line for line in lines if line.startswith("UNIMPLEMENTED")]
    assert len(failed) == 5, out.stdout + out.stderr
    for line in failed:
        assert "NCCL" in line and "TFRING_NCCL_LIBRARY" in line, line
        assert "pip install nvidia-nccl-cu12" in line, line
    assert "INFO False" in lines
    assert "CPU [1.0, 1.0, 1.0]" in lines  # the runtime is unharmed


def test_gpu_info_reports_what_is_missing():
    import tfring._basics.gpu

    info = tfring._basics.gpu.gpu_info()
    assert set(info) == {"built", "available", "detail"}
    if not info["available"]:
        assert "NCCL" in info["detail"] or "CUDA" in info["detail"]


def test_pin_gpu_is_a_no_op_without_gpus():
    tf = pytest.importorskip("tensorflow")
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("this machine has GPUs")
    import tfring._basics.gpu

    assert tfring._basics.gpu.pin_gpu() is None
    assert tfring._basics.gpu.load_tf_gpu_kernels(tf) is None


# ------------------------------------------------------------------------------ one GPU

DTYPES = [np.float32, np.float16, np.float64, np.int32, np.int64, np.uint8, np.int8, np.bool_]
OPS = {"sum": tfring.Sum, "average": tfring.Average, "min": tfring.Min, "max": tfring.Max,
       "product": tfring.Product}


def _data(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 5, shape).astype(dtype)
    return rng.uniform(-2, 2, shape).astype(dtype)


def _to_gpu(a):
    return _core.DeviceBuffer.from_numpy(np.ascontiguousarray(a), 0)


def _host(x):
    return x.to_numpy() if isinstance(x, _core.DeviceBuffer) else np.asarray(x)


@pytest.fixture
def one_rank():
    if not _AVAILABLE:
        pytest.skip(_SKIP_REASON)
    tfring.init()
    yield
    tfring.shutdown()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", list(OPS))
def test_allreduce_one_rank(one_rank, dtype, op):
    if dtype == np.bool_ and op == "average":
        pytest.skip("Average is not defined for bool (refused on CPU and GPU alike)")
    x = _data((7, 3), dtype, 1)
    out = tfring.allreduce(_to_gpu(x), op=OPS[op], name=f"ar.{op}.{np.dtype(dtype).name}")
    assert isinstance(out, _core.DeviceBuffer) and out.shape == (7, 3) and out.device == 0
    np.testing.assert_array_equal(out.to_numpy(), x)  # one rank: every op is the identity


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("elements", [1000, 13740, (3 << 20) + 7])
def test_allreduce_scale_factors_one_rank(one_rank, dtype, elements):
    # NCCL's one-rank kernel for premultiplied sums and averages leaves up to 31 tail
    # elements unwritten unless the call is < 16 KiB or a multiple of it (13740 and 3M+7
    # elements are neither; tests/fake_gpu emulates the kernel). Large inputs also check
    # that the host-to-device copy has landed before a kernel on tfring's stream reads it.
    x = _data((elements,), dtype, 2)
    np.testing.assert_array_equal(tfring.allreduce(_to_gpu(x), op=tfring.Average, name="avg").to_numpy(), x)
    out = tfring.allreduce(_to_gpu(x), op=tfring.Sum, prescale_factor=3.0, postscale_factor=0.5, name="scaled")
    tol = 1e-2 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(out.to_numpy().astype(np.float64), x.astype(np.float64) * 1.5, rtol=tol, atol=tol)
    out = tfring.allreduce(_to_gpu(x), op=tfring.Average, postscale_factor=2.0, name="scaled.avg")
    np.testing.assert_allclose(out.to_numpy().astype(np.float64), x.astype(np.float64) * 2.0, rtol=tol, atol=tol)


@pytest.mark.gpu
def test_unsupported_gpu_reduction_fails_at_enqueue(one_rank):
    x = _to_gpu(np.ones(4, np.int32))
    with pytest.raises(errors.UnimplementedError, match="prescale/postscale"):
        tfring.allreduce(x, op=tfring.Sum, prescale_factor=2.0, name="int.scaled")
    with pytest.raises(errors.UnimplementedError, match="Max with prescale"):
        tfring.allreduce(_to_gpu(np.ones(4, np.float32)), op=tfring.Max, postscale_factor=2.0, name="max.scaled")
    np.testing.assert_array_equal(tfring.allreduce(x, op=tfring.Sum, name="int.after").to_numpy(), np.ones(4))


@pytest.mark.gpu
def test_allreduce_in_place_and_empty(one_rank):
    x = _to_gpu(np.arange(10, dtype=np.float32))
    same = _core.allreduce_async(x, "inplace", int(tfring.Sum), 1.0, 1.0, True).wait()
    assert same is x
    np.testing.assert_array_equal(x.to_numpy(), np.arange(10, dtype=np.float32))
    assert tfring.allreduce(x, op=tfring.Sum, name="inplace.out", out=x) is x  # out=array: in place, as NumPy
    with pytest.raises(TypeError, match="tensor 'other.out': out= on a GPU array must be that array itself"):
        tfring.allreduce(x, op=tfring.Sum, name="other.out", out=_to_gpu(np.zeros(10, np.float32)))
    empty = tfring.allreduce(_to_gpu(np.zeros((0, 4), np.float32)), op=tfring.Sum, name="empty")
    assert empty.shape == (0, 4)


@pytest.mark.gpu
def test_fusion_on_gpu(one_rank):
    # Tensors enqueued back to back are fused by the coordinator into one NCCL call over
    # tfring's device buffer; retry a few rounds so a slow wake-up cannot hide it.
    rng = np.random.default_rng(3)
    for attempt in range(20):
        before = tfring.stats()["fused_tensors"]
        arrays = [rng.uniform(-1, 1, int(rng.integers(1, 3000))).astype(np.float32) for _ in range(40)]
        buffers = [_to_gpu(a) for a in arrays]
        handles = [tfring.allreduce_async(b, op=tfring.Sum, name=f"fuse.{attempt}.{i}") for i, b in enumerate(buffers)]
        for a, h in zip(arrays, handles):
            np.testing.assert_array_equal(h.wait().to_numpy(), a)
        if tfring.stats()["fused_tensors"] > before:
            return
    pytest.fail("no GPU allreduce was ever fused")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8, np.bool_, np.float16])
def test_allgather_broadcast_alltoall_reducescatter_one_rank(one_rank, dtype):
    x = _data((6, 2, 3), dtype, 4)
    name = np.dtype(dtype).name
    np.testing.assert_array_equal(_host(tfring.allgather(_to_gpu(x), name=f"ag.{name}")), x)
    np.testing.assert_array_equal(_host(tfring.broadcast(_to_gpu(x), 0, name=f"bc.{name}")), x)
    out, splits = tfring.alltoall(_to_gpu(x), splits=[6], name=f"a2a.{name}")
    np.testing.assert_array_equal(_host(out), x)
    assert splits.tolist() == [6]
    rs = tfring.reducescatter(_to_gpu(x), op=tfring.Sum if dtype != np.bool_ else tfring.Max, name=f"rs.{name}")
    np.testing.assert_array_equal(_host(rs), x)
    np.testing.assert_array_equal(_host(tfring.allgather(_to_gpu(x[:0]), name=f"ag0.{name}")), x[:0])


@pytest.mark.gpu
def test_cupy_arrays_in_and_out(one_rank):
    if os.environ.get("TFRING_FAKE_GPU"):
        pytest.skip("CuPy needs the real CUDA runtime, not tests/fake_gpu")
    cupy = pytest.importorskip("cupy")
    x = cupy.arange(12, dtype=cupy.float32).reshape(3, 4) * 2
    out = tfring.allreduce(x, op=tfring.Average, name="cupy.ar")
    np.testing.assert_array_equal(cupy.asnumpy(cupy.asarray(out)), cupy.asnumpy(x))
    gathered = cupy.asarray(tfring.allgather(x, name="cupy.ag"))
    assert gathered.shape == (3, 4) and bool((gathered == x).all())
    inplace = cupy.ones(5, dtype=cupy.float64)
    assert _core.allreduce_async(inplace, "cupy.inplace", int(tfring.Sum), 1.0, 1.0, True).wait() is inplace


# ------------------------------------------------------------------------------ fake GPU
# tests/fake_gpu: CPU stand-ins for libcudart and a one-rank libnccl (device memory is host
# memory). With them the one-GPU tests above run on any machine, through the very code
# paths a GPU takes (library search and symbol lookup, non-blocking communicator creation,
# fusion buffer, premultiplied reductions, DeviceBuffer), and faults can be injected.

# The fake_gpu_env fixture (tests/conftest.py) builds them: an environment that loads them.


def _run_python(code, env, timeout=120):
    return subprocess.run([sys.executable, "-c", code], env=env, check=False, capture_output=True, text=True,
                          timeout=timeout)


def test_one_gpu_tests_pass_on_fake_gpu_libraries(fake_gpu_env):
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu",
                          os.path.abspath(__file__)], env=fake_gpu_env, cwd=ROOT, check=False,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    passed = re.search(r"(\d+) passed", out.stdout)
    assert passed and int(passed.group(1)) >= 50, out.stdout[-2000:]


_FAULT_SCRIPT = r"""
import time, numpy as np, tfring
from tfring import _core
from tfring import _errors as errors
tfring.init()
start = time.monotonic()
try:
    x = _core.DeviceBuffer.from_numpy(np.ones(1000, np.float32), 0)
    tfring.allreduce(x, op=tfring.Sum, name="stuck")
    print("NO-ERROR")
except errors.TfringError as e:
    print("ERROR", type(e).__name__, round(time.monotonic() - start, 1), str(e).replace("\n", " | "))
try:
    tfring.allreduce(np.ones(2, np.float32), name="after")
    print("AFTER ok")
except errors.TfringError as e:
    print("AFTER", type(e).__name__)
tfring.shutdown()
"""


def test_stuck_gpu_collective_times_out_and_aborts_the_communicator(fake_gpu_env, tmp_path):
    log = tmp_path / "teardown.log"
    env = dict(fake_gpu_env, FAKE_CUDA_HANG="1", TFRING_TIMEOUT_S="1", TFRING_LOG_LEVEL="warning",
               FAKE_NCCL_TEARDOWN_LOG=str(log))
    out = _run_python(_FAULT_SCRIPT, env)
    assert log.read_text().split() == ["abort"]  # a failed job never finalizes
    line = next((x for x in out.stdout.splitlines() if x.startswith("ERROR")), out.stdout + out.stderr)
    assert line.startswith("ERROR TimeoutError"), line
    assert float(line.split()[2]) < 10, line
    assert "TFRING_TIMEOUT_S" in line and "aborted" in line, line
    assert "aborted the NCCL communicator" in out.stderr, out.stderr
    assert "AFTER TimeoutError" in out.stdout  # the job is broken: later ops fail, never hang


def test_nccl_async_error_aborts_instead_of_hanging(fake_gpu_env):
    # The GPU kernel never finishes (a peer died mid-collective) and NCCL reports it.
    env = dict(fake_gpu_env, FAKE_CUDA_HANG="1", FAKE_NCCL_ASYNC_ERROR="1", TFRING_TIMEOUT_S="60")
    out = _run_python(_FAULT_SCRIPT, env)
    line = next((x for x in out.stdout.splitlines() if x.startswith("ERROR")), out.stdout + out.stderr)
    assert line.startswith("ERROR PeerLostError"), line
    assert float(line.split()[2]) < 10, line  # well before TFRING_TIMEOUT_S
    assert "a peer may have died" in line and "closed its connection" in line, line


def test_too_old_nccl_is_refused(fake_gpu_env):
    out = _run_python(_FAULT_SCRIPT, dict(fake_gpu_env, FAKE_NCCL_VERSION="21300"))
    assert "ERROR UnimplementedError" in out.stdout and "2.14 or newer" in out.stdout, out.stdout + out.stderr
    assert "AFTER ok" in out.stdout


_SHUTDOWN_SCRIPT = r"""
import time, numpy as np, tfring
from tfring import _core
tfring.init()
tfring.allreduce(_core.DeviceBuffer.from_numpy(np.ones(1000, np.float32), 0), op=tfring.Sum, name="g")
start = time.monotonic()
tfring.shutdown()
print("SHUTDOWN", round(time.monotonic() - start, 3))
"""


def _teardown_run(env, tmp_path):
    """Runs _SHUTDOWN_SCRIPT; returns (its output, the fake NCCL's teardown calls)."""
    log = tmp_path / "teardown.log"
    env = dict(env, PYTHONPATH=ROOT, TFRING_LOG_LEVEL="info", FAKE_NCCL_TEARDOWN_LOG=str(log))
    out = _run_python(_SHUTDOWN_SCRIPT, env)
    assert out.returncode == 0 and "SHUTDOWN" in out.stdout, out.stdout + out.stderr[-3000:]
    return out, (log.read_text().split() if log.exists() else None)


@pytest.mark.gpu
def test_clean_shutdown_finalizes_the_nccl_communicator(tmp_path):
    if not _AVAILABLE:
        pytest.skip(_SKIP_REASON)
    out, calls = _teardown_run(os.environ, tmp_path)
    assert "finalized and destroyed the NCCL communicator on GPU 0" in out.stderr, out.stderr[-3000:]
    assert "aborted" not in out.stderr, out.stderr[-3000:]
    if calls is not None:  # the fake libraries say which calls ran
        assert calls == ["finalize", "destroy"], calls


def test_finalize_that_never_ends_is_aborted_within_the_shutdown_bound(fake_gpu_env, tmp_path):
    env = dict(fake_gpu_env, FAKE_NCCL_FINALIZE_HANG="1", TFRING_SHUTDOWN_TIMEOUT_S="2")
    out, calls = _teardown_run(env, tmp_path)
    assert calls == ["finalize", "abort"], calls
    assert float(out.stdout.split("SHUTDOWN")[1].split()[0]) < 1.9, out.stdout  # half the bound, then abort
    assert "could not be closed cleanly, aborted it" in out.stderr and "TFRING_SHUTDOWN_TIMEOUT_S" in out.stderr, \
        out.stderr[-3000:]


# ------------------------------------------------------------------------------ two GPUs

_TWO_GPU_SCRIPT = r"""
import numpy as np, tfring
from tfring import _core
tfring.init()
r, n = tfring.rank(), tfring.size()
dev = tfring.local_rank()
def gpu(a): return _core.DeviceBuffer.from_numpy(np.ascontiguousarray(a), dev)
x = np.arange(10, dtype=np.float32) + r
out = tfring.allreduce(gpu(x), op=tfring.Sum, name="ar").to_numpy()
assert np.array_equal(out, sum(np.arange(10, dtype=np.float32) + p for p in range(n))), out
g = tfring.allgather(gpu(np.full((r + 1, 2), r, np.int32)), name="ag").to_numpy()
assert g.shape == (sum(p + 1 for p in range(n)), 2), g.shape
b = tfring.broadcast(gpu(np.full(3, r, np.float64)), 1, name="bc").to_numpy()
assert (b == 1).all(), b
rows = np.arange(3 * 2, dtype=np.float32).reshape(3, 2) * (r + 1)
rs = tfring.reducescatter(gpu(rows), op=tfring.Sum, name="rs").to_numpy()
full = sum(np.arange(6, dtype=np.float32).reshape(3, 2) * (p + 1) for p in range(n))
lo = sum(3 // n + (p < 3 % n) for p in range(r))
assert np.array_equal(rs, full[lo: lo + 3 // n + (r < 3 % n)]), rs
out, splits = tfring.alltoall(gpu(np.full((n + r, 1), r, np.int64)), splits=[1] * (n - 1) + [1 + r], name="a2a")
expected = np.concatenate([np.full((1 if r < n - 1 else 1 + p, 1), p, np.int64) for p in range(n)])
assert np.array_equal(out.to_numpy(), expected), out.to_numpy()
assert splits.tolist() == [1 if r < n - 1 else 1 + p for p in range(n)], splits
scaled = tfring.allreduce(gpu(x), op=tfring.Sum, prescale_factor=2.0, name="scaled").to_numpy()
assert np.allclose(scaled, 2 * sum(np.arange(10, dtype=np.float32) + p for p in range(n))), scaled
m = tfring.allreduce(gpu(np.array([r, -r], np.int32)), op=tfring.Max, name="max").to_numpy()
assert m.tolist() == [n - 1, 0], m
handles = [tfring.allreduce_async(gpu(np.full(5, r + i, np.float32)), op=tfring.Average, name=f"fuse.{i}")
           for i in range(8)]
for i, h in enumerate(handles):
    assert np.allclose(h.wait().to_numpy(), i + (n - 1) / 2), i
print("RANK-OK", r, flush=True)
tfring.shutdown()
"""


@pytest.mark.gpu
@pytest.mark.multiprocess
def test_two_ranks_on_two_gpus():
    if not _AVAILABLE:
        pytest.skip(_SKIP_REASON)
    devices = re.search(r"(\d+) device\(s\)", _DETAIL)
    if devices is None or int(devices.group(1)) < 2:
        pytest.skip("needs two GPUs (NCCL refuses two ranks on one GPU)")
    from tests.helpers import run_job

    result = run_job(2, _TWO_GPU_SCRIPT, timeout=180)
    assert "RANK-OK 0" in result.stdout and "RANK-OK 1" in result.stdout, result.stdout



@pytest.mark.multiprocess
@pytest.mark.parametrize("ranks", [2, 3])
def test_multi_rank_gpu_path_on_fake_gpu_libraries(fake_gpu_env, ranks, tmp_path):
    # The NCCL backend's multi-rank branches (unequal allgather as grouped broadcasts,
    # alltoall as grouped send/recv, uneven reducescatter as grouped reduces, fusion,
    # premultiplied sums) on the fake libraries: one fake device per rank, ranks exchanging
    # through files (tests/fake_gpu/fake_nccl.cc).
    from tests.helpers import run_job

    env = dict(fake_gpu_env, FAKE_CUDA_DEVICES=str(ranks), FAKE_NCCL_DIR=str(tmp_path), FAKE_NCCL_TIMEOUT_S="30")
    result = run_job(ranks, _TWO_GPU_SCRIPT, timeout=120, env=env)
    for r in range(ranks):
        assert f"RANK-OK {r}" in result.stdout, result.stdout + result.stderr
