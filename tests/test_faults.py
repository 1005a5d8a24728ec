"""Fault matrix of the core (issue: no hangs, nothing lost): a rank dies at each stage of a
job and every survivor must end with an error naming the cause, fast, while the launcher
exits non-zero naming the first failed rank. TF/Keras faults live in test_keras_*.py.

Bounds asserted here are generous (10 s, CI machines are noisy); measured figures are in
docs/reliability.md (tests/measure/faults.py)."""

import re

import pytest

from tests.helpers import format_job_output, rank_output, run_job

# Every script prints "T0 <time>" on the victim just before the fault and "ERR <time> <msg>"
# on each survivor when its error arrives.
PRELUDE = """
import os, sys, time, numpy as np, tfring
stage = sys.argv[1]
class Fault(BaseException):
    pass
def fault():
    print("T0", time.time(), flush=True)
    if stage.endswith("exception"):
        raise Fault("user code failed on purpose")
    os.kill(os.getpid(), 9)
def report(e):
    print("ERR", time.time(), type(e).__name__, str(e).replace("\\n", " "), flush=True)
    raise SystemExit(1)
"""

DURING_INIT = PRELUDE + """
if os.environ["TFRING_RANK"] == "1":
    time.sleep(1.0)
    fault()
try:
    tfring.init(start_timeout_s=60)
    tfring.allreduce(np.ones(4), name="first")
except Exception as e:
    report(e)
"""

DURING_NEGOTIATION = PRELUDE + """
tfring.init()
tfring.barrier()
if tfring.rank() == 1:
    time.sleep(0.5)
    fault()
try:
    tfring.allreduce(np.ones(4), name="waits_for_rank_1")  # rank 1 never submits it
except Exception as e:
    report(e)
"""

DURING_TRANSFER = PRELUDE + """
tfring.init()
x = np.ones(4 << 20, np.float32)  # 16 MiB ring allreduce
try:
    for i in range(1000):
        if tfring.rank() == 1 and i == 3:
            fault()
        tfring.allreduce(x, name="big")
except Exception as e:
    report(e)
"""


def _times(result, np_, victim=1):
    report = format_job_output(result.stdout, result.stderr)
    t0 = float(re.search(r"T0 ([\d.]+)", rank_output(result.stdout, victim)).group(1))
    delays = {}
    for r in range(np_):
        if r == victim:
            continue
        m = re.search(r"ERR ([\d.]+) (\w+) (.*)", rank_output(result.stdout, r))
        assert m, f"rank {r} ended without reporting an error\n{report}"
        delays[r] = (float(m.group(1)) - t0, m.group(2), m.group(3))
    return delays, report


@pytest.mark.multiprocess
@pytest.mark.timeout(90)
@pytest.mark.parametrize("stage,script", [("negotiation", DURING_NEGOTIATION), ("transfer", DURING_TRANSFER)])
@pytest.mark.parametrize("np_", [2, 3])
def test_a_killed_rank_ends_every_survivor_with_peer_lost(stage, script, np_):
    result = run_job(np_, script, script_args=(stage,), timeout=60, check=False,
                     args=("--grace-period-s", "20"))
    delays, report = _times(result, np_)
    assert result.returncode == 128 + 9 and "rank 1 (pid" in result.stderr, report
    for delay, kind, message in delays.values():
        assert kind == "PeerLostError", report
        assert "rank 1" in message, report
        assert delay < 10, report


@pytest.mark.multiprocess
@pytest.mark.timeout(90)
def test_a_rank_raising_an_exception_ends_the_job_naming_it():
    result = run_job(3, DURING_TRANSFER, script_args=("transfer-exception",), timeout=60, check=False,
                     args=("--grace-period-s", "20"))
    delays, report = _times(result, 3)
    assert result.returncode == 1 and "rank 1 (pid" in result.stderr and "first" in result.stderr, report
    assert "user code failed on purpose" in rank_output(result.stderr, 1), report
    for delay, kind, message in delays.values():
        # the survivors learn why: rank 1's uncaught exception travels with the abort
        assert kind == "AbortedError", report
        assert "rank 1 exited: uncaught Fault: user code failed on purpose" in message, report
        assert delay < 10, report


@pytest.mark.multiprocess
@pytest.mark.timeout(90)
def test_a_rank_dying_before_rendezvous_stops_the_job():
    result = run_job(2, DURING_INIT, script_args=("init",), timeout=60, check=False)
    report = format_job_output(result.stdout, result.stderr)
    assert result.returncode == 128 + 9, report
    assert "rank 1 (pid" in result.stderr and "SIGKILL" in result.stderr, report
