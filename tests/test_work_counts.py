"""Work per call, counted against budgets: the guard of the fixed cost of a call.

The fixed cost of an 8-byte allreduce from a ``tf.function`` grew from 37 to 58 to 80 us
over three turns, and no test noticed: timings cannot be tests here (this VM's speed
changes per launch). Counts can. tests/workers/work_counts.py counts, per call of an
8-byte allreduce from a ``tf.function`` and per Keras ``fit`` step (DistributedOptimizer
and the README's two callbacks), at np=2: Python function calls (all of them, and those in
tfring's own modules), control messages and bytes, data bytes, fusion copies,
collectives; and the output buffers a held 4 MiB argument's allreduce goes through. Each
is deterministic for a given TensorFlow/Keras version (two launches agree exactly), so each
has a budget below: work added to the hot path fails here.

When a change makes a count go *down*, lower its budget in the same change (the test
prints the counts). When a change must add work, raise the budget and say why in the
commit message.

What is not counted: the C++ core's CPU work per call between the kernel's ComputeAsync
and the done callback (instructions, wake-ups, locks, allocations): the background thread
spins or blocks by elapsed time, so those counts vary from launch to launch.
"""

import importlib.util
import os

import pytest

from tests.helpers import rank_output, run_job

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers", "work_counts.py")

# Budgets per call (allreduce8) and per step (keras_step), np=2, TF 2.21 / Keras 3.15.
# Measured 2026-12-05 at the change that added this test (two launches, identical).
# {what: {count: (rank 0's budget, the other rank's budget)}}
# Control messages carry counters as varints: one grows by a byte when it passes 128 (then
# 16,384), which a launch's window may or may not include (seen: 22 and 23 bytes per step).
VARINT = 2
BUDGETS = {
    "allreduce8": {
        "python_calls": (357, 357),  # TF's own call path of a traced tf.function
        "tfring_python_calls": (0, 0),  # none of tfring's Python on the hot path
        "control_messages_sent": (1, 1),
        "control_bytes_sent": (91 + VARINT, 22 + VARINT),
        "bytes_sent": (8, 8),
        "bytes_received": (8, 8),
        "fusion_copied_bytes": (0, 0),
        "collectives": (1, 1),
        "tensors": (1, 1),
    },
    # Distinct output addresses of a held 4 MiB argument's allreduce over 20 calls: TF gets
    # its buffer back each call (2 while tfring's kernel held it past TF's done callback).
    "allreduce_4mib": {"output_buffers": (1, 1)},
    "keras_step": {
        "python_calls": (817, 817),  # Keras' loop, callbacks, the step function's call
        "tfring_python_calls": (1, 1),  # BroadcastGlobalVariablesCallback.on_train_batch_end (returns at once)
        "control_messages_sent": (1, 1),
        "control_bytes_sent": (130 + VARINT, 22 + VARINT),
        "bytes_sent": (848, 848),  # the fused gradients (212 floats)
        "bytes_received": (848, 848),
        "fusion_copied_bytes": (848, 848),
        "collectives": (1, 1),
        "tensors": (4, 4),
    },
}

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.skipif(
        importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("tfring.tensorflow") is None,
        reason="needs TensorFlow and the TF op library (tfring.tensorflow)",
    ),
]


def _counts(text):
    """{what: {count: value}} from work_counts.py's COUNT lines."""
    out = {}
    for line in text.splitlines():
        if line.startswith("COUNT "):
            _, what, name, value = line.split()
            out.setdefault(what, {})[name] = float(value)
    return out


def over_budget(counts, budgets, rank):
    """{count: (counted, budget)} for each count above its budget (the rank's column)."""
    column = 0 if rank == 0 else 1
    return {name: (counts.get(name), budget[column]) for name, budget in budgets.items()
            if counts.get(name) is None or counts[name] > budget[column]}


@pytest.fixture(scope="module")
def counts():
    with open(WORKER) as f:
        result = run_job(2, f.read(), timeout=240)
    per_rank = {r: _counts(rank_output(result.stdout, r)) for r in range(2)}
    for r in range(2):
        assert "DONE" in rank_output(result.stdout, r), result.stdout
        print(f"rank {r}:", per_rank[r])
    return per_rank


@pytest.mark.timeout(300)
@pytest.mark.parametrize("what", sorted(BUDGETS))
def test_work_per_call_stays_within_its_budget(counts, what):
    for r in range(2):
        over = over_budget(counts[r][what], BUDGETS[what], r)
        assert not over, (f"rank {r}, {what}: counts above budget (counted, budget): {over}; every count: "
                          f"{counts[r][what]}. Remove the added work, or raise the budget in "
                          f"tests/test_work_counts.py and say why.")


@pytest.mark.timeout(300)
def test_the_budgets_refuse_work_added_on_purpose(counts):
    """The same call with one Python call into tfring and a second allreduce added: the
    guard must name both (a guard that cannot fail is a defect)."""
    for r in range(2):
        over = over_budget(counts[r]["allreduce8+work"], BUDGETS["allreduce8"], r)
        for name in ("tfring_python_calls", "python_calls", "control_messages_sent", "collectives", "tensors"):
            assert name in over, (r, name, over)
        # The caller holding the previous result needs a second output buffer.
        assert "output_buffers" in over_budget(counts[r]["allreduce_4mib+held"], BUDGETS["allreduce_4mib"], r), r
