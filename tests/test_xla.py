"""tfring's collectives inside XLA-compiled functions (cc/tf/xla/): every collective, dtype and
reduce op at np=2 and np=3 against the same ops eagerly, grouped allreduce fused as eagerly,
errors named at compile and run time, a custom loop and Keras fit with jit_compile=True
(tests/workers/tf_xla.py); a rank killed, or frozen, while its peers wait inside a compiled
step: every survivor gets the named error within the same bounds as without XLA."""

import os
import signal

import pytest

from tests.helpers import run_job
from tests.test_faults import PRELUDE, _times
from tests.test_faults_frozen import FREEZE, PEER_TIMEOUT_S, SLACK_S

pytest.importorskip("tensorflow")

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers")


@pytest.mark.multiprocess
@pytest.mark.timeout(150)
@pytest.mark.parametrize("np_", [2, 3])
def test_compiled_collectives_equal_eager_and_keras_fit_stays_compiled(np_):
    with open(os.path.join(WORKERS, "tf_xla.py")) as f:
        result = run_job(np_, f.read(), timeout=120)
    for r in range(np_):
        assert f"rank {r}: tf xla OK" in result.stdout, result.stdout


# Rank 1 dies (or freezes) while the others wait for it inside a compiled step (the done
# call's future).
KILLED_IN_COMPILED_STEP = PRELUDE + """
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
import tfring.tensorflow as hvd
hvd.init()

@tf.function(jit_compile=True)
def step(x):
    return hvd.allreduce(x * 2.0, op=hvd.Sum, name="compiled.step")

x = tf.ones([1024])
step(x)  # compiled and run once everywhere
hvd.barrier()
if hvd.rank() == 1:
    time.sleep(0.5)
    fault()
try:
    for _ in range(100000):
        step(x)
except Exception as e:
    report(e)
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(90)
def test_a_rank_killed_during_a_compiled_step_ends_the_survivor_fast():
    result = run_job(2, KILLED_IN_COMPILED_STEP, script_args=("transfer",), timeout=60, check=False,
                     args=("--grace-period-s", "20"))
    delays, report = _times(result, 2)
    assert result.returncode == 128 + 9 and "rank 1 (pid" in result.stderr, report
    delay, kind, message = delays[0]
    # TF rewrites UnavailableError from an XLA launch (not a "communication op") into
    # InternalError and says so in the message; tfring's own message is kept in full.
    assert kind in ("UnavailableError", "InternalError"), report
    assert "rank 1" in message and (kind == "UnavailableError" or "UnavailableError" in message), report
    assert delay < 10, report


FROZEN_IN_COMPILED_STEP = KILLED_IN_COMPILED_STEP.replace("import os,", "import os, signal, threading,").replace(
    "import tfring.tensorflow as hvd\n", "import tfring.tensorflow as hvd\n" + FREEZE).replace(
    """if hvd.rank() == 1:
    time.sleep(0.5)
    fault()
""", """if hvd.rank() == 1:
    threading.Timer(0.5, freeze).start()
""")


@pytest.mark.multiprocess
@pytest.mark.timeout(90)
def test_a_rank_frozen_during_a_compiled_step_is_named_by_every_survivor():
    result = run_job(3, FROZEN_IN_COMPILED_STEP, script_args=("transfer",), timeout=60, check=False,
                     env={"TFRING_PEER_TIMEOUT_S": str(PEER_TIMEOUT_S)}, args=("--grace-period-s", "5"))
    delays, report = _times(result, 3)
    assert result.returncode == 128 + signal.SIGSTOP, report
    for delay, kind, message in delays.values():
        assert kind in ("UnavailableError", "InternalError"), report  # InternalError: TF's rewrite, as above
        assert "rank 1 (host " in message and f"TFRING_PEER_TIMEOUT_S={PEER_TIMEOUT_S:g}" in message, report
        assert PEER_TIMEOUT_S - 0.5 <= delay < PEER_TIMEOUT_S + SLACK_S, report
