"""tfring.tensorflow gives Horovod 0.28's numbers where it used to differ silently (issue 14,
first part): gradient conventions of allgather / broadcast / reducescatter in eager mode, in
a tf.function and in a TF1 graph (the non-root broadcast gradient no longer deadlocks the
root there), alltoall without splits, integer IndexedSlices averages, and a reduce op passed
where the deprecated ``average`` goes. The worker is tests/workers/horovod_conventions.py."""

import pytest

from tests.test_tf_collectives import run_worker

pytest.importorskip("tensorflow")


@pytest.mark.multiprocess
@pytest.mark.timeout(150)
@pytest.mark.parametrize("np_", [2, 3])
def test_horovod_gradient_conventions_and_argument_rules(np_):
    # A collective that some rank never runs (the graph-mode broadcast gradient before the
    # fix) fails every rank after 20 s instead of hanging the test.
    run_worker("horovod_conventions.py", np_, "rank {r}: horovod conventions OK", timeout=120,
               env={"TFRING_STALL_SHUTDOWN_S": "20"})
