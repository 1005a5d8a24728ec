"""Single-copy reads (TFRING_SHM_CMA) by default: a large allreduce between two local ranks
with a CPU each is read straight from the peer's memory; where the machine's ranks outnumber
its CPUs the default keeps to the rings; TFRING_SHM_CMA=1 overrides that rule, and a rank
that requires single-copy next to a rank whose default declines fails init naming both the
setting and the CPUs (docs/core.md, "Single-copy reads")."""

import json
import os

import pytest

from tests.helpers import rank_output, run_job

pytestmark = pytest.mark.multiprocess

CPUS = len(os.sched_getaffinity(0))


def _yama_forbids_cma():
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            return int(f.read().strip()) >= 2
    except OSError:
        return False


if _yama_forbids_cma():
    pytest.skip("Yama ptrace_scope >= 2: the kernel refuses single-copy reads here", allow_module_level=True)

# 16 MiB float32: the ring's segments (8 MiB at np=2, 5.3 MiB at np=3) are above the 1 MiB
# threshold, so every byte received goes single-copy when single-copy is on.
SCRIPT = """
import json, os
import numpy as np
import tfring
if os.environ.get("REQUIRE_ON_RANK_0") and os.environ["TFRING_RANK"] == "0":
    os.environ["TFRING_SHM_CMA"] = "1"
tfring.init()
n = tfring.size()
x = np.full(1 << 22, tfring.rank() + 1, np.float32)
before = tfring.stats()["links"]
y = tfring.allreduce(x, op=tfring.Sum, name="large")
assert np.all(y == n * (n + 1) / 2), y[:4]
after = tfring.stats()["links"]
delta = {key: sum(after[p][key] - before.get(p, {}).get(key, 0) for p in after)  # {} before any transfer
         for key in ("bytes_received", "single_copy_bytes_received")}
print("LINKS", json.dumps(delta), flush=True)
tfring.shutdown()
"""


def _received(result, rank):
    line = next(l for l in rank_output(result.stdout, rank).splitlines() if l.startswith("LINKS "))
    return json.loads(line[len("LINKS "):])


@pytest.mark.timeout(90)
@pytest.mark.skipif(CPUS < 2, reason="needs 2 CPUs: one per rank")
def test_two_ranks_with_a_cpu_each_read_large_sends_single_copy_by_default():
    result = run_job(2, SCRIPT, timeout=60, env=None)
    for rank in range(2):
        got = _received(result, rank)
        assert got["bytes_received"] == 16 << 20, got  # np=2: half in each of the two phases
        assert got["single_copy_bytes_received"] == got["bytes_received"], got


@pytest.mark.timeout(90)
@pytest.mark.skipif(CPUS >= 3, reason="needs more ranks than CPUs (3 ranks, at most 2 CPUs)")
def test_the_default_keeps_to_the_rings_where_ranks_outnumber_cpus_and_1_overrides_it():
    rings = run_job(3, SCRIPT, timeout=60, env=None)
    required = run_job(3, SCRIPT, timeout=60, env={"TFRING_SHM_CMA": "1"})
    for rank in range(3):
        assert _received(rings, rank)["bytes_received"] > 0
        assert _received(rings, rank)["single_copy_bytes_received"] == 0, _received(rings, rank)
        got = _received(required, rank)
        assert got["single_copy_bytes_received"] == got["bytes_received"] > 0, got


@pytest.mark.timeout(90)
@pytest.mark.skipif(CPUS >= 3, reason="needs more ranks than CPUs (3 ranks, at most 2 CPUs)")
def test_required_next_to_a_declining_default_fails_init_naming_the_setting_and_the_cpus():
    result = run_job(3, SCRIPT, timeout=60, env={"REQUIRE_ON_RANK_0": "1"}, check=False)
    assert result.returncode != 0
    rank0 = rank_output(result.stdout + result.stderr, 0)
    assert "TFRING_SHM_CMA=1 but rank 1 has TFRING_SHM_CMA=auto" in rank0, rank0[-3000:]
    assert "3 ranks share" in rank0 and "CPUs on this machine" in rank0, rank0[-3000:]
