"""The core runtime through the NumPy API: single process in-process, and 2-3 real
processes started by the launcher (each job has a hard timeout)."""

import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

import tfring
from tests.helpers import run_job
from tfring import _errors as errors

HERE = os.path.dirname(os.path.abspath(__file__))
WORKERS = os.path.join(HERE, "workers")
ROOT = os.path.dirname(HERE)


def worker(name, *args):
    return open(os.path.join(WORKERS, name)).read(), args


def test_single_process_without_launcher():
    tfring.init()
    try:
        assert (tfring.rank(), tfring.size(), tfring.local_rank(), tfring.cross_size()) == (0, 1, 0, 1)
        x = np.arange(5, dtype=np.float32)
        assert np.array_equal(tfring.allreduce(x), x)
        assert np.array_equal(tfring.allgather(x), x)
        out, splits = tfring.alltoall(x)
        assert np.array_equal(out, x) and splits.tolist() == [5]
        cfg = tfring.config()
        assert cfg["TFRING_SIZE"] == ("1", "default")
        assert {p["name"] for p in tfring.config_table()} >= {"TFRING_FUSION_THRESHOLD", "TFRING_CYCLE_TIME_MS"}
    finally:
        tfring.shutdown()
    assert not tfring.is_initialized()
    with pytest.raises(errors.PreconditionError, match="not initialized"):
        tfring.rank()


def test_explicit_settings_win_over_environment(monkeypatch):
    monkeypatch.setenv("TFRING_CYCLE_TIME_MS", "3")
    tfring.init(cycle_time_ms=7, fusion_threshold=1024)
    try:
        cfg = tfring.config()
        assert cfg["TFRING_CYCLE_TIME_MS"] == ("7", "argument")
        assert cfg["TFRING_FUSION_THRESHOLD"] == ("1024", "argument")
    finally:
        tfring.shutdown()
    tfring.init()
    try:
        assert tfring.config()["TFRING_CYCLE_TIME_MS"] == ("3", "env")
    finally:
        tfring.shutdown()


@pytest.mark.parametrize("var,value", [("TFRING_CYCLE_TIME_MS", "fast"), ("TFRING_TIMEOUT_S", "-1"),
                                       ("TFRING_LOG_LEVEL", "loud"), ("TFRING_SIZE", "2")])
def test_bad_setting_fails_init_naming_the_variable(var, value):
    code = "import tfring\ntry:\n    tfring.init()\nexcept tfring.errors.InvalidArgumentError as e:\n    print(e)\n"
    env = dict(os.environ, PYTHONPATH=ROOT, **{var: value})
    out = subprocess.run([sys.executable, "-c", code], check=False, env=env, capture_output=True, text=True, timeout=60)
    assert var in out.stdout, out.stdout + out.stderr


FAULTS_OF_STEPS = """
import ctypes, resource, threading, tfring
tfring.init()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
faults = []
def steps():  # a thread's arena, as TF's compute threads have: 16 MiB out per step, the last one held
    held, start = None, 0
    for step in range(22):
        if step == 2:
            start = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        out = libc.malloc(16 << 20)
        ctypes.memset(out, step, 16 << 20)
        if held:
            libc.free(held)
        held = out
    faults.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - start)
    libc.free(held)
t = threading.Thread(target=steps)
t.start()
t.join()
print("FAULTS", faults[0])
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
@pytest.mark.parametrize("keep", ["1", "0"])
def test_init_keeps_freed_buffers_for_the_next_step_unless_turned_off(keep):
    """TFRING_KEEP_FREED_MEMORY (docs/core.md): after init(), a freed 16 MiB buffer is reused
    without faulting its 4,096 pages in again; turned off, glibc trims and refaults it."""
    env = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES" and not k.startswith("MALLOC_")}
    env.update(PYTHONPATH=ROOT, TFRING_KEEP_FREED_MEMORY=keep)
    out = subprocess.run([sys.executable, "-c", FAULTS_OF_STEPS], check=False, env=env, capture_output=True,
                         text=True, timeout=60)
    faults = int(re.search(r"FAULTS (\d+)", out.stdout).group(1)) if "FAULTS" in out.stdout else None
    assert faults is not None, out.stdout + out.stderr
    if keep == "1":
        assert faults < 1024, f"{faults} page faults in 20 steps with freed buffers kept"
    else:
        assert faults > 4096, f"only {faults} page faults in 20 steps with glibc's defaults: the test shows nothing"


THREAD_NAMES = """
import os, tfring
tfring.init()
tfring.allreduce(__import__("numpy").ones(4, "float32"), name="warm")
names = set()
for tid in os.listdir("/proc/self/task"):
    with open(f"/proc/self/task/{tid}/comm") as f:
        names.add(f.read().strip())
print(f"rank {tfring.rank()} THREADS", " ".join(sorted(n for n in names if n.startswith("tfring-"))), flush=True)
tfring.shutdown()
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_the_cores_threads_carry_their_names():
    """`top -H`, perf and gdb show tfring's threads by name (base/thread_name.h)."""
    result = run_job(2, THREAD_NAMES, timeout=45)
    for r in range(2):
        names = re.search(rf"rank {r} THREADS (.*)", result.stdout).group(1).split()
        assert "tfring-loop" in names and "tfring-live" in names, result.stdout


def test_unknown_explicit_setting_is_refused():
    with pytest.raises(errors.InvalidArgumentError, match="unknown tfring setting"):
        tfring.init(no_such_setting=1)


@pytest.mark.multiprocess
@pytest.mark.timeout(120)
@pytest.mark.parametrize("np_", [2, 3])
def test_random_mixed_collectives_match_numpy(np_):
    script, _ = worker("core_soak.py")
    result = run_job(np_, script, args=(), script_args=("7", "300"), timeout=90)
    for r in range(np_):
        assert f"rank {r}: 300 collectives OK" in result.stdout


@pytest.mark.multiprocess
@pytest.mark.timeout(120)
@pytest.mark.parametrize("np_", [2, 3])
def test_errors_name_tensor_and_ranks_then_job_recovers(np_):
    script, _ = worker("core_errors.py")
    result = run_job(np_, script, timeout=90)
    for r in range(np_):
        assert f"rank {r}: errors OK" in result.stdout


OUT = """
import numpy as np, tfring
tfring.init()
n, r = tfring.size(), tfring.rank()
x = np.arange(1000, dtype=np.float32) * (r + 1)
original = x.copy()
y = np.full_like(x, -7)
got = tfring.allreduce(x, op=tfring.Sum, name="separate", out=y)
assert got is y and np.array_equal(y, np.arange(1000, dtype=np.float32) * n * (n + 1) / 2), y[:4]
assert np.array_equal(x, original), "the input changed"
got = tfring.allreduce(x, op=tfring.Sum, name="inplace", out=x)
assert got is x and np.array_equal(x, original * 0 + np.arange(1000, dtype=np.float32) * n * (n + 1) / 2)
scaled = np.empty_like(x)
tfring.allreduce(original, op=tfring.Average, name="scaled", prescale_factor=2.0, out=scaled)
assert np.allclose(scaled, np.arange(1000, dtype=np.float32) * (n + 1)), scaled[:4]
b = np.zeros(6, np.int64) if r else np.arange(6, dtype=np.int64)
dest = np.empty_like(b)
assert tfring.broadcast(b, 0, name="bcast", out=dest) is dest and dest.tolist() == list(range(6))
# refused at the call, on the calling rank, before anything is negotiated
read_only = np.empty_like(x)
read_only.flags.writeable = False
shared = np.empty(1001, np.float32)
for src, bad, needle in [(x, np.empty(999, np.float32), "another shape"), (x, np.empty(1000, np.float64), "dtype"),
                         (x, np.empty(2000, np.float32)[::2], "C-contiguous"), (x, read_only, "read-only"),
                         (shared[:1000], shared[1:], "overlaps the input")]:
    try:
        tfring.allreduce(src, name="bad", out=bad)
    except ValueError as e:
        assert needle in str(e) and "'bad'" in str(e) and "empty_like" in str(e), e
    else:
        raise AssertionError(needle + " accepted")
try:
    tfring.allreduce(x, name="bad", out=[0.0] * 1000)
except TypeError as e:
    assert "must be a NumPy array" in str(e), e
else:
    raise AssertionError("a list accepted")
tfring.barrier()
print("rank", r, "out OK", flush=True)
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_out_receives_the_result_in_place_or_preallocated_and_bad_out_is_refused():
    result = run_job(2, OUT, timeout=45)
    for r in range(2):
        assert f"rank {r} out OK" in result.stdout


STALL = """
import time, numpy as np, tfring
tfring.init()
if tfring.rank() == 1:
    time.sleep(2.5)
out = tfring.allreduce(np.ones(2), name="late_tensor")
print("rank", tfring.rank(), "done", out.tolist(), flush=True)
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_stall_warning_names_tensor_and_missing_rank():
    result = run_job(2, STALL, env={"TFRING_STALL_WARNING_S": "1"}, timeout=45)
    assert "late_tensor" in result.stdout + result.stderr
    assert "missing from rank(s) 1" in result.stdout + result.stderr
    assert "rank 1 done" in result.stdout


NEVER = """
import time, numpy as np, tfring
tfring.init()
t0 = time.time()
if tfring.rank() == 0:
    try:
        tfring.allreduce(np.ones(2), name="never_matched")
    except tfring.errors.TimeoutError as e:
        print("rank 0 timeout after %.1f s: %s" % (time.time() - t0, e), flush=True)
        raise SystemExit(3)
else:
    time.sleep(30)
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_stall_shutdown_turns_a_silent_rank_into_an_error():
    t0 = time.time()
    result = run_job(2, NEVER, env={"TFRING_STALL_SHUTDOWN_S": "2"}, timeout=45, check=False)
    assert result.returncode != 0
    assert "rank 0 timeout after" in result.stdout
    assert "never_matched" in result.stdout and "missing from rank(s) 1" in result.stdout
    assert time.time() - t0 < 25


def test_configuration_doc_is_generated_from_the_table():
    out = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gen_config_docs.py"), "--check"],
                         check=False, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout


TIMELINE = """
import json, sys, numpy as np, tfring
tfring.init()
path = sys.argv[1]
tfring.start_timeline(path)
for step in range(2):
    handles = [tfring.allreduce_async(np.ones(64, np.float32), name=f"grad.{k}") for k in range(4)]
    [h.wait(timeout=30) for h in handles]
tfring.broadcast(np.ones(3), 0, name="weights")
tfring.stop_timeline()
tfring.barrier()
if tfring.rank() == 0:
    events = [e for e in json.load(open(path)) if e]
    names = {e["name"] for e in events}
    for needed in ["NEGOTIATE", "ALLREDUCE", "BROADCAST", "TRANSFER", "RANK_READY 0", "RANK_READY 1"]:
        assert needed in names, (needed, names)
    rows = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert {"grad.0", "weights"} <= rows, rows
    assert any(e["name"] == "ALLREDUCE" and e["args"]["bytes"] > 0 for e in events)
    print("timeline OK", len(events), flush=True)
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_timeline_records_negotiation_readiness_and_transfers(tmp_path):
    result = run_job(2, TIMELINE, script_args=(str(tmp_path / "t.json"),), timeout=45)
    assert "timeline OK" in result.stdout


@pytest.mark.multiprocess
@pytest.mark.timeout(120)
def test_tcp_path_without_shared_memory():
    script, _ = worker("core_soak.py")
    result = run_job(3, script, script_args=("11", "200"), env={"TFRING_SHM": "0"}, timeout=90)
    assert "rank 2: 200 collectives OK" in result.stdout


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_wildcard_bind_address_advertises_a_reachable_one():
    # 0.0.0.0 binds every interface; peers must be told an address they can connect to
    script, _ = worker("core_soak.py")
    result = run_job(2, script, script_args=("5", "20"), timeout=45,
                     env={"TFRING_SHM": "0", "TFRING_BIND_ADDR": "0.0.0.0", "TFRING_LOG_LEVEL": "debug"})
    assert "rank 1: 20 collectives OK" in result.stdout
    advertised = re.findall(r"data listener on 0\.0\.0\.0:\d+, advertised as (\S+):\d+", result.stderr)
    assert advertised == ["127.0.0.1", "127.0.0.1"], result.stderr[-3000:]


LAZY_RINGS = """
import json
import numpy as np
import tfring
tfring.init()
r, n = tfring.rank(), tfring.size()
def ring_peers():
    return sorted(int(p) for p, link in tfring.stats()["links"].items() if int(p) != r and link["shared_memory"])
before = ring_peers()
y = tfring.allreduce(np.full(1 << 18, r + 1, np.float32), op=tfring.Sum, name="big")
assert np.all(y == n * (n + 1) / 2), y[:4]
print("RINGS", r, json.dumps({"before": before, "after": ring_peers()}), flush=True)
tfring.shutdown()
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(90)
def test_shared_memory_rings_are_made_on_first_use_with_lazy_connections():
    # Past the full mesh (here forced at 4 ranks) a local pair's rings come with its first
    # transfer: none after init, then only the ring allreduce's two neighbours.
    result = run_job(4, LAZY_RINGS, timeout=75, env={"TFRING_DATA_CONNECTIONS": "lazy",
                                                      "TFRING_ALGORITHM": "allreduce=ring"})
    got = {int(m.group(1)): json.loads(m.group(2)) for m in re.finditer(r"RINGS (\d) (\{.*\})", result.stdout)}
    assert sorted(got) == [0, 1, 2, 3], result.stdout[-2000:]
    for r, peers in got.items():
        assert peers == {"before": [], "after": sorted({(r + 1) % 4, (r + 3) % 4})}, (r, peers)


GPU_LIBRARY_FROM_INIT = """
import tfring, tfring._basics.gpu
tfring.init(nccl_library="/nonexistent/from-init/libnccl.so.2")
print("DETAIL", tfring._basics.gpu.gpu_info()["detail"])
"""


def test_init_nccl_library_reaches_the_gpu_library_loader():
    """init(nccl_library=...) wins over the environment in the GPU library lookup (it used to
    read the environment only)."""
    env = dict(os.environ, TFRING_NCCL_LIBRARY="/nonexistent/from-env/libnccl.so.2")
    out = subprocess.run([sys.executable, "-c", GPU_LIBRARY_FROM_INIT], env=env, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert "TFRING_NCCL_LIBRARY=/nonexistent/from-init/libnccl.so.2" in out, out
    assert "from-env" not in out, out


def test_python_tables_come_from_the_core():
    """Error codes, reduce ops and element types are defined once, in the core, and read by
    name everywhere else (issue 16): every core error code has its own Python class whose
    tf.errors class is not the catch-all, and the reduce op constants are the core's."""
    from tfring import _core

    codes = _core.error_codes()
    assert set(codes) == {cls.code for cls in errors._BY_CODE.values()}, "a core error code has no class"
    for name, value in codes.items():
        assert errors.from_code(value, "m").code == name
    ops = _core.reduce_ops()
    assert (tfring.Sum, tfring.Average, tfring.Min, tfring.Max, tfring.Product, tfring.Adasum) == tuple(
        ops[n] for n in ("Sum", "Average", "Min", "Max", "Product", "Adasum"))
    assert sorted(ops.values()) == list(range(len(ops))), "reduce ops are numbered without gaps"
    assert set(_core.data_types()) == {"uint8", "int8", "int16", "uint16", "int32", "int64", "float16", "bfloat16",
                                       "float32", "float64", "bool"}


def test_root_api_options_are_keyword_only():
    import inspect

    positional = {"allreduce": 1, "allgather": 1, "alltoall": 1, "reducescatter": 1, "broadcast": 2, "barrier": 1}
    for name, count in positional.items():
        for fn in (getattr(tfring, name), getattr(tfring, name + "_async", None)):
            if fn is None:
                continue
            params = list(inspect.signature(fn).parameters.values())
            assert [p.kind for p in params[:count]] == [inspect.Parameter.POSITIONAL_OR_KEYWORD] * count, fn
            assert all(p.kind == inspect.Parameter.KEYWORD_ONLY for p in params[count:]), fn
    # Horovod's allreduce(tensor, average) order would silently mean something else here.
    with pytest.raises(TypeError, match="positional"):
        tfring.allreduce(np.ones(2, np.float32), tfring.Max)


REINIT_SCRIPT = r"""
import numpy as np
import tfring
from tfring import _errors as errors

tfring.init()
r = tfring.rank()
pending = []  # (a dropped handle would wait for its result)
if r == 0:  # calls rank 1 never makes: rank 0's automatic names run ahead
    for _ in range(2):
        try:
            pending.append(tfring.allreduce_async(np.ones(2, np.float32)))
        except errors.TfringError:
            pass
tfring.barrier(name="end.1")
tfring.shutdown()
tfring.init()  # a new session: automatic names start again on every rank
out = tfring.allreduce_async(np.full(2, r + 1.0, np.float32), op=tfring.Sum).wait(timeout=15)
assert out.tolist() == [3.0, 3.0], out
print("RANK-OK", r, flush=True)
tfring.shutdown()
"""


@pytest.mark.multiprocess
def test_automatic_names_start_again_after_shutdown():
    result = run_job(2, REINIT_SCRIPT, timeout=60)
    assert "RANK-OK 0" in result.stdout and "RANK-OK 1" in result.stdout, result.stdout


LOW_OPEN_FILE_LIMIT = """
import os, resource
import numpy as np
import tfring
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
low = len(os.listdir("/proc/self/fd")) + 6
resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
tfring.init()
raised = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
total = tfring.allreduce(np.ones(4, np.float32), op=tfring.Sum, name="x")
print(f"rank {tfring.rank()}: soft limit {low} -> {raised}, hard {hard}, sum {total[0]:.0f}")
tfring.shutdown()
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(90)
def test_a_low_soft_open_file_limit_is_raised_at_init():
    # A soft `ulimit -n` too low for the job's connections (the default 1024 ends a job of a
    # few hundred ranks) is raised towards the hard limit at init (cc/core/base/fd_limit.h),
    # instead of the job failing with EMFILE in the middle of its connections.
    result = run_job(3, LOW_OPEN_FILE_LIMIT, timeout=75)
    lines = re.findall(r"rank (\d): soft limit (\d+) -> (\d+), hard (\d+), sum (\d+)", result.stdout)
    assert len(lines) == 3, result.stdout
    for _rank, low, raised, hard, total in lines:
        assert int(raised) > int(low) + 200 and int(raised) <= int(hard) and total == "3", result.stdout
