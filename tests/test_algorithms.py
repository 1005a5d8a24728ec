"""TFRING_ALGORITHM from Python: a bad pin fails init naming what is accepted; a pin that
cannot run on the job (hierarchical on one host) is named by rank 0 and the table decides,
with exact results. The algorithms themselves: cc/tests/collectives_test.cc (Hierarchical*),
cc/tests/algorithm_test.cc (the table) and tests/test_launcher_multihost.py (2 x 2 hosts)."""

import pytest

import tfring
from tests.helpers import run_job
from tfring import _errors as errors


def test_bad_algorithm_pin_fails_init_naming_what_is_accepted():
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"TFRING_ALGORITHM='broadcast=ring'.*broadcast has no algorithm 'ring' "
                             r"\(accepted: auto, chain, hierarchical\)"):
        tfring.init(algorithm="broadcast=ring")
    assert not tfring.is_initialized()


PIN_SCRIPT = """
import numpy as np
import tfring
tfring.init()
r, n = tfring.rank(), tfring.size()
out = tfring.allgather(np.full((r + 2, 3), r, np.int32), name="g")
assert np.array_equal(out[:, 0], np.repeat(np.arange(n), np.arange(n) + 2)), out
print(f"rank {r}: pinned OK {tfring.config()['TFRING_ALGORITHM'][0]}", flush=True)
tfring.shutdown()
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_a_pin_that_cannot_run_is_named_and_the_table_decides():
    result = run_job(2, PIN_SCRIPT, timeout=45, env={"TFRING_ALGORITHM": "allgather=hierarchical,allreduce=ring"})
    assert result.stdout.count("pinned OK allgather=hierarchical,allreduce=ring") == 2, result.stdout
    assert "TFRING_ALGORITHM pins allgather to hierarchical, which cannot run on this job (not several hosts " \
           "of equal rank counts, 2 ranks): the table chooses instead" in result.stderr, result.stderr[-2000:]
    assert "pins allreduce" not in result.stderr  # the ring runs anywhere


# Every allreduce algorithm through the NumPy API, pinned, on emulated hosts (host ids made
# different per pair of ranks by TFRING_CROSS_RANK, so the job has 3 hosts x 2 ranks: the
# hierarchical algorithms run, and 6 ranks are not a power of two for the others):
# every dtype and op against NumPy, Average's scaling, pre/postscale, in place (out=) and
# out of place, sizes from 0 (pinned, small buffers run the algorithm too), a process set,
# fused groups, and a joined rank's zeros. Inputs are small integers: every order of
# reduction is exact.
ALGORITHM_SCRIPT = """
import os
os.environ["TFRING_CROSS_RANK"] = str(int(os.environ["TFRING_RANK"]) // 2)  # hosts of 2 ranks
os.environ["TFRING_CROSS_SIZE"] = str(int(os.environ["TFRING_SIZE"]) // 2)
import numpy as np
import tfring
tfring.init()
r, n = tfring.rank(), tfring.size()
rng = lambda rank, k: np.random.default_rng(1000 * k + rank)
def inputs(k, count, dtype, op, rank):
    g = rng(rank, k)
    if op is tfring.Product:
        return g.choice([1, 2, -1] if np.dtype(dtype).kind != "u" else [1, 2], count).astype(dtype)
    return g.integers(0 if np.dtype(dtype).kind == "u" else -3, 4, count).astype(dtype)
def expected(k, count, dtype, op, ranks):
    xs = np.stack([inputs(k, count, dtype, op, q).astype(np.float64) for q in ranks])
    f = {tfring.Sum: np.sum, tfring.Average: np.sum, tfring.Min: np.min, tfring.Max: np.max,
         tfring.Product: np.prod}[op]
    out = f(xs, axis=0).astype(dtype)
    return out / len(ranks) if op is tfring.Average else out
k = 0
for dtype in (np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8, np.int8):
    for op in (tfring.Sum, tfring.Average, tfring.Min, tfring.Max, tfring.Product):
        if op is tfring.Average and np.dtype(dtype).kind != "f":
            continue
        for count in (0, 1, 5, 1001, 40000):
            k += 1
            x = inputs(k, count, dtype, op, r)
            got = tfring.allreduce(x, op=op, name=f"a{k}")
            want = expected(k, count, dtype, op, range(n)).astype(dtype)
            if op is tfring.Average:  # sum x (1/n) in the dtype: within one rounding of NumPy's sum / n
                same = np.allclose(got, want, rtol={2: 1e-3, 4: 1e-6, 8: 1e-12}[np.dtype(dtype).itemsize], atol=0)
            else:
                same = np.array_equal(got, want)
            assert got.dtype == want.dtype and same, (dtype, op, count, got[:5], want[:5])
            every = tfring.allgather(got[None, :], name=f"g{k}")  # every rank holds the same bits
            assert all(np.array_equal(row.view(np.uint8), got.view(np.uint8)) for row in every), (dtype, op, count)
            tfring.allreduce(x, op=op, name=f"a{k}", out=x)  # in place
            assert np.array_equal(x, got), ("in place", dtype, op, count)
for count in (3, 40000):
    k += 1
    x = inputs(k, count, np.float32, tfring.Sum, r)
    got = tfring.allreduce(x, op=tfring.Sum, prescale_factor=0.5, postscale_factor=3.0, name=f"s{k}")
    assert np.array_equal(got, expected(k, count, np.float32, tfring.Sum, range(n)) * np.float32(1.5)), "scales"
evens = tfring.add_process_set(list(range(0, n, 2)))
if r % 2 == 0:
    k += 1
    x = inputs(k, 40000, np.float64, tfring.Sum, r)
    got = tfring.allreduce(x, op=tfring.Sum, name="ps", process_set=evens)
    assert np.array_equal(got, expected(k, 40000, np.float64, tfring.Sum, range(0, n, 2))), "process set"
handles = []
for i, count in enumerate((7, 300, 20000, 1)):  # submitted together: fused
    handles.append((i, count, tfring.allreduce_async(inputs(900 + i, count, np.float32, tfring.Sum, r),
                                                     op=tfring.Sum, name=f"f{i}")))
for i, count, h in handles:
    assert np.array_equal(h.wait(timeout=60), expected(900 + i, count, np.float32, tfring.Sum, range(n))), "fused"
if r == n - 1:
    tfring.join()
else:
    got = tfring.allreduce(inputs(950, 30000, np.float32, tfring.Sum, r), op=tfring.Sum, name="joined")
    assert np.array_equal(got, expected(950, 30000, np.float32, tfring.Sum, range(n - 1))), "join's zeros"
    tfring.join()
print(f"rank {r}: algorithm OK", flush=True)
tfring.shutdown()
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(240)
@pytest.mark.parametrize("pin,extra", [
    ("allreduce=hierarchical", {"TFRING_HIERARCHICAL_BLOCK_BYTES": "64"}),  # pipelined from 128 bytes
    ("allreduce=hierarchical_doubling", {}),
    ("allreduce=rabenseifner", {}),
])
def test_every_allreduce_algorithm_is_exact_through_the_api(pin, extra):
    result = run_job(6, ALGORITHM_SCRIPT, timeout=200,
                     env={"TFRING_ALGORITHM": pin, "TFRING_LOG_LEVEL": "info", "TFRING_SPIN_US": "0", **extra})
    assert result.stdout.count("algorithm OK") == 6, result.stdout[-3000:] + result.stderr[-3000:]
    assert "hierarchical across 3 hosts x 2 ranks" in result.stderr, result.stderr[-2000:]
    assert "which cannot run on this job" not in result.stderr, result.stderr[-2000:]
