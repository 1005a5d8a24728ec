"""XLA's CUDA custom-call path on tests/fake_gpu's libraries (no GPU, no CUDA TensorFlow).

``tests/fake_gpu/xla_cuda_order.cc`` calls what the XLA:GPU FFI handlers call once they
decoded XLA's call frame (``cc/tf_gpu/xla_cuda_calls.h``: Start on the start custom call,
Done on the done one), with a fake "XLA stream", through the core's NCCL backend. The fake
CUDA runtime and NCCL append every event record, stream wait, copy and collective to one
log, in call order, which the tests read:

    record <ready> on <XLA>  ->  wait <NCCL> for <ready>  ->  collective on <NCCL>
        ->  record <done> on <NCCL>  ->  wait <XLA> for <done>

and the error paths: a request refused at enqueue fails Start; an error before the work
reaches the NCCL stream is returned by Done (XLA's stream never waits); one after (NCCL
reports a dead peer while the collective runs) is returned by the next Start. What is not covered here: XLA's own decoding of the
FFI call frame on a CUDA build of TF (``make gpu-compile-check`` compiles the handlers and
registers them in the installed TF; no lent machine has a CUDA build of TF 2.21).
"""

import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE_DIR = os.path.join(ROOT, "tests", "fake_gpu")
CORE_INCLUDE = os.path.join(ROOT, "cc", "core")
PKG = os.path.join(ROOT, "tfring")


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("xla_cuda_fake") / "xla_cuda_order")
    subprocess.run(["g++", "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-I" + CORE_INCLUDE,
                    os.path.join(FAKE_DIR, "xla_cuda_order.cc"), os.path.join(ROOT, "cc", "tf_gpu", "xla_cuda_calls.cc"),
                    os.path.join(ROOT, "cc", "tf", "xla", "inflight.cc"), "-L" + PKG, "-ltfring_core",
                    "-Wl,-rpath," + PKG, "-pthread", "-o", out], check=True)
    return out


@pytest.fixture
def built(program, fake_gpu_env):
    return program, fake_gpu_env


def _run(built, mode, tmp_path, **extra):
    program, base_env = built
    log = tmp_path / "order.log"
    env = dict(base_env, FAKE_CUDA_EVENT_LOG=str(log), TFRING_LOG_LEVEL="error", **extra)
    for key in ("TFRING_RANK", "TFRING_SIZE"):
        env.pop(key, None)
    result = subprocess.run([program, mode], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = log.read_text().splitlines() if log.exists() else []
    outcome = dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)
    return outcome, lines, result.stdout


def _index(lines, pattern, start=0):
    for i in range(start, len(lines)):
        if re.fullmatch(pattern, lines[i]):
            return i
    raise AssertionError(f"no line matching {pattern!r} after line {start} in:\n" + "\n".join(lines))


def test_event_order_xla_stream_to_nccl_stream_and_back(built, tmp_path):
    outcome, lines, stdout = _run(built, "ok", tmp_path)
    assert outcome["start a"] == "OK" and outcome["done a"] == "OK", stdout
    assert outcome["start b"] == "OK" and outcome["done b"] == "OK", stdout
    values = [line for line in stdout.splitlines() if line.startswith("values:")]
    assert values == ["values: 1 2 3 4 5 6 7 8", "values: 10 11 12 13", "values: 20 21 22 23"]  # one rank: Sum = x
    # Tensor a: XLA's stream is S1; its ready event is the first event recorded there.
    ready = re.fullmatch(r"record (E\d+) on S1", lines[_index(lines, r"record E\d+ on S1")]).group(1)
    i = _index(lines, rf"wait (S\d+) for {ready}")
    nccl = re.fullmatch(rf"wait (S\d+) for {ready}", lines[i]).group(1)
    assert nccl != "S1"
    j = _index(lines, rf"ncclAllReduce on {nccl}", i)
    k = _index(lines, rf"record (E\d+) on {nccl}", j)
    done = re.fullmatch(rf"record (E\d+) on {nccl}", lines[k]).group(1)
    assert done != ready
    _index(lines, rf"wait S1 for {done}", k)
    # Tensors b and c (one group, fused): the NCCL stream waits for XLA's stream before the
    # copies into the fusion buffer, and XLA's stream waits for both done events.
    second = _index(lines, r"record (E\d+) on S1", _index(lines, rf"wait S1 for {done}", k) + 1)
    ready2 = re.fullmatch(r"record (E\d+) on S1", lines[second]).group(1)
    w = _index(lines, rf"wait {nccl} for {ready2}", second)
    c = _index(lines, rf"copy on {nccl}", w)
    r = _index(lines, rf"ncclAllReduce on {nccl}", c)
    recorded = [re.fullmatch(rf"record (E\d+) on {nccl}", line) for line in lines[r:]]
    done_events = [m.group(1) for m in recorded if m][:2]
    assert len(done_events) == 2
    for event in done_events:
        _index(lines, rf"wait S1 for {event}", r)


def test_error_before_the_nccl_stream_is_returned_by_start_or_done(built, tmp_path):
    outcome, lines, stdout = _run(built, "before", tmp_path)
    # Refused at enqueue: the start call fails.
    assert outcome["start flags"].startswith("UNIMPLEMENTED: ") and "bool" in outcome["start flags"], stdout
    # Refused by the NCCL backend before any device work: the done call fails, naming the tensor.
    assert outcome["start host"] == "OK", stdout
    assert outcome["done host"].startswith("INVALID_ARGUMENT: ") and "'host'" in outcome["done host"], stdout
    assert "not GPU memory" in outcome["done host"], stdout
    assert not [line for line in lines if line.startswith("wait S1 ")], lines  # XLA's stream waits on nothing
    assert not [line for line in lines if line.startswith("ncclAllReduce")], lines


def test_error_after_the_nccl_stream_is_returned_by_the_next_call(built, tmp_path):
    outcome, lines, stdout = _run(built, "after", tmp_path, FAKE_CUDA_HANG="1", FAKE_NCCL_ASYNC_ERROR="1",
                                  FAKE_NCCL_ASYNC_ERROR_DELAY_MS="500", TFRING_TIMEOUT_S="30")
    assert outcome["start a"] == "OK" and outcome["done a"] == "OK", stdout  # the work was on the NCCL stream
    assert "wait S1 for" in "\n".join(lines)
    late = outcome["start b"]
    assert late != "OK" and "earlier XLA collective" in late, stdout
    assert late.startswith("PEER_LOST: "), stdout
    assert stdout.rstrip().endswith("exit")  # no hang, no abort


# --------------------------------------------------------------------- Python side


def test_lowered_here_follows_the_cuda_handler_registration(monkeypatch):
    tf = pytest.importorskip("tensorflow")
    from tfring._tensorflow import xla

    monkeypatch.setattr(xla, "_tf_sees_gpu", lambda: True)
    monkeypatch.setattr(xla, "_cuda_status", "")
    assert xla.lowered_here() and xla.lowered("allreduce") and not xla.lowered("join")
    monkeypatch.setattr(xla, "_cuda_status", "tfring was built without its GPU library")
    assert not xla.lowered_here() and not xla.lowered("allreduce")
    graph = tf.Graph()
    monkeypatch.setattr(xla, "in_xla_context", lambda g=None: True)
    with pytest.raises(xla.XlaCompilationError, match="built without its GPU library"):
        xla.check_not_xla("tfring.tensorflow.allreduce", graph)


def test_cuda_handler_status_here_names_the_missing_library():
    pytest.importorskip("tensorflow")
    from tfring._basics import gpu
    from tfring._tensorflow import xla

    status = xla.cuda_handler_status()
    library = os.path.join(PKG, gpu.GPU_KERNEL_LIBRARY)
    if os.path.exists(library):
        assert status == "", status  # built (e.g. TFRING_WITH_NCCL=1): the handlers registered
    else:
        assert "built without its GPU library" in status
