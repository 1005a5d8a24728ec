"""The autotuner (TFRING_AUTOTUNE, docs/configuration.md "Autotuning") in real jobs: every
rank switches to the same settings after the same response, settings the user set are never
changed, the CSV log has a header and one row per trial, results are bit-identical with it
on or off where the reduction order allows it (two ranks), and a rank dying mid-trial ends
the job with the same named fault as without it. The search itself is unit-tested in
cc/tests/autotuner_test.cc."""

import csv
import importlib.util
import itertools
import math
import re

import pytest

from tests.helpers import rank_output, run_job

pytestmark = pytest.mark.multiprocess

# Quick tuning: no warm-up, 2 steps per sample, up to 8 trials (a 40-step job sees them all).
QUICK = {"TFRING_AUTOTUNE": "1", "TFRING_AUTOTUNE_WARMUP_SAMPLES": "0",
         "TFRING_AUTOTUNE_STEPS_PER_SAMPLE": "2", "TFRING_AUTOTUNE_MAX_SAMPLES": "8",
         "TFRING_LOG_LEVEL": "warning,runtime=info"}

# Three gradients (small, mid, large) allreduced per step; prints a digest of every result.
NUMPY_STEPS = """
import hashlib, sys, numpy as np, tfring
tfring.init()
rng = np.random.default_rng(7 + tfring.rank())
grads = [rng.standard_normal(n).astype(np.float32) for n in (300, 20000, 300000)]
digest = hashlib.sha256()
for step in range(int(sys.argv[1])):
    for i, g in enumerate(grads):
        out = tfring.allreduce(g * (1 + step), name=f"grad{i}", op=tfring.Average)
        digest.update(out.tobytes())
print("DIGEST", tfring.rank(), digest.hexdigest(), flush=True)
"""

APPLIED = re.compile(r"autotune: applied after response (\d+): (.*)$")


def _applied(result, rank):
    """[(response index, {setting: value})] that `rank` applied, in order."""
    out = []
    for line in rank_output(result.stderr, rank).splitlines():
        m = APPLIED.search(line)
        if m:
            out.append((int(m.group(1)), dict(kv.split("=") for kv in m.group(2).split())))
    return out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("np_", [2, 3])
def test_every_rank_applies_the_same_settings_at_the_same_response_and_explicit_ones_stay(np_, tmp_path):
    log = tmp_path / "autotune.csv"
    # Through tfringrun's flags this time (QUICK's TFRING_AUTOTUNE left out).
    env = {**QUICK, "TFRING_FUSION_THRESHOLD": "2097152", "TFRING_CHUNK_BYTES": "131072"}
    del env["TFRING_AUTOTUNE"]
    result = run_job(np_, NUMPY_STEPS, script_args=("40",), env=env, timeout=100,
                     args=("--autotune", "--autotune-log-file", str(log)))
    applied = [_applied(result, r) for r in range(np_)]
    assert len(applied[0]) >= 3, result.stderr
    for r in range(1, np_):
        assert applied[r] == applied[0], f"rank {r} switched elsewhere or to other values\n{result.stderr}"
    for _, values in applied[0]:
        assert values["TFRING_FUSION_THRESHOLD"] == "2097152" and values["TFRING_CHUNK_BYTES"] == "131072"
    assert len({tuple(sorted(v.items())) for _, v in applied[0]}) >= 3, "the search moved through candidates"

    rows = list(csv.reader(log.open()))
    assert rows[0][0] == "trial" and rows[0][-1] == "score_bytes_per_s"
    assert "TFRING_CYCLE_TIME_MS" in rows[0] and "TFRING_RECURSIVE_DOUBLING_BYTES" in rows[0]
    trials = rows[1:-1]
    assert [row[0] for row in trials] == [str(i) for i in range(8)], "one row per trial"
    assert rows[-1][0] == "best"
    assert rows[-1][1:-1] in [row[1:-1] for row in trials], "the best is a point tried"
    # Its score: a candidate's that won, or the mean of the opening and closing it kept.
    at_best = [float(row[-1]) for row in trials if row[1:-1] == rows[-1][1:-1]]
    kept_or_won = at_best + [(a + b) / 2 for a, b in itertools.combinations(at_best, 2)]
    assert any(math.isclose(float(rows[-1][-1]), s, rel_tol=1e-4) for s in kept_or_won), rows
    fusion = rows[0].index("TFRING_FUSION_THRESHOLD")
    assert {row[fusion] for row in rows[1:]} == {"2097152"}
    # The last values every rank applied are the best row's.
    best = dict(zip(rows[0][1:-1], rows[-1][1:-1]))
    assert applied[0][-1][1] == best
    best_line = [ln for ln in rank_output(result.stderr, 0).splitlines() if "autotune: best after 8 trials" in ln]
    assert len(best_line) == 1, result.stderr


def _digests(result, np_):
    return [re.search(r"DIGEST \d+ (\w+)", rank_output(result.stdout, r)).group(1) for r in range(np_)]


@pytest.mark.timeout(150)
def test_numpy_results_are_bit_identical_with_autotuning_on_or_off():
    off = run_job(2, NUMPY_STEPS, script_args=("40",), timeout=70)
    on = run_job(2, NUMPY_STEPS, script_args=("40",), env=QUICK, timeout=70)
    assert len(_applied(on, 1)) >= 3, on.stderr
    assert _digests(on, 2) == _digests(off, 2)


KERAS_FIT = """
import hashlib, numpy as np, tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
import keras, tfring.keras as hvd
hvd.init()
keras.utils.set_random_seed(1)
x = np.random.default_rng(hvd.rank()).random((256, 8)).astype("float32")
y = x @ np.arange(8, dtype="float32")
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(1)])
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.01)), loss="mse")
model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False,
          callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
digest = hashlib.sha256(b"".join(w.tobytes() for w in model.get_weights())).hexdigest()
print("DIGEST", hvd.rank(), digest, flush=True)
"""


@pytest.mark.timeout(240)
@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="needs TensorFlow")
def test_a_keras_fit_is_bit_identical_with_autotuning_on_or_off():
    off = run_job(2, KERAS_FIT, timeout=110)
    on = run_job(2, KERAS_FIT, env=QUICK, timeout=110)
    assert len(_applied(on, 1)) >= 3, on.stderr
    assert _digests(on, 2) == _digests(off, 2)
    assert _digests(on, 2)[0] == _digests(on, 2)[1]


DIES_MID_TRIAL = """
import os, numpy as np, tfring
tfring.init()
x = np.ones(1000, np.float32)
try:
    for step in range(100):
        if tfring.rank() == 1 and step == 9:
            os.kill(os.getpid(), 9)
        tfring.allreduce(x, name="g")
except Exception as e:
    print("ERR", type(e).__name__, str(e).replace("\\n", " "), flush=True)
    raise SystemExit(1)
"""


@pytest.mark.timeout(150)
def test_a_rank_dying_mid_trial_gives_the_same_named_fault_as_without_autotuning():
    faults = {}
    for label, env in (("off", {}), ("on", QUICK)):
        result = run_job(2, DIES_MID_TRIAL, env=env, timeout=60, check=False, args=("--grace-period-s", "20"))
        assert result.returncode == 128 + 9 and "rank 1 (pid" in result.stderr, result.stderr
        m = re.search(r"ERR (\w+) (.*)", rank_output(result.stdout, 0))
        assert m, result.stdout + result.stderr
        faults[label] = m.group(1)
        assert "rank 1" in m.group(2), m.group(2)
        if label == "on":
            assert _applied(result, 0), "rank 1 died while the autotuner was trying settings"
    assert faults["on"] == faults["off"] == "PeerLostError"
