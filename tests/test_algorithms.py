"""TFRING_ALGORITHM from Python: a bad pin fails init naming what is accepted; a pin that
cannot run on the job (hierarchical on one host) is named by rank 0 and the table decides,
with exact results. The algorithms themselves: cc/tests/collectives_test.cc (Hierarchical*),
cc/tests/algorithm_test.cc (the table) and tests/test_launcher_multihost.py (2 x 2 hosts)."""

import pytest

import tfring
from tests.helpers import run_job
from tfring import errors


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
