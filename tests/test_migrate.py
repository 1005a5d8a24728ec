"""tfring-migrate end to end: scripts written in the style of Horovod's TF2/Keras examples and
of TF's MultiWorkerMirroredStrategy tutorial (tests/migrate_inputs/) are rewritten with
``--write``, need no manual edit, and then train under ``tfringrun -np 2``: both ranks end
with the same weights and a loss well below the first one. The Ray one
(horovod_ray_tf2_mnist.py) is migrated here too; tests/test_ray.py runs it."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.helpers import job_env, rank_output, run_job

INPUTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "migrate_inputs")
RESULT = re.compile(r"RESULT (.*)")


@pytest.fixture(scope="module")
def migrated(tmp_path_factory):
    folder = tmp_path_factory.mktemp("migrated")
    for name in os.listdir(INPUTS):
        shutil.copy(os.path.join(INPUTS, name), folder / name)
    result = subprocess.run([sys.executable, "-m", "tfring._migrate.cli", "--write", "."], cwd=folder,
                            env=job_env(), capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, f"manual edits left or an error:\n{result.stderr}"
    assert "changed 5 of 5 file(s); 0 manual edit(s) left" in result.stderr, result.stderr
    return folder


def results(stdout):
    """{rank: {key: value}} from each rank's RESULT line."""
    out = {}
    for rank in (0, 1):
        (line,) = RESULT.findall(rank_output(stdout, rank, "stdout"))
        out[rank] = dict(item.split("=") for item in line.split())
    return out


def assert_trained_alike(stdout, improvement=0.5):
    by_rank = results(stdout)
    assert by_rank[0]["checksum"] == by_rank[1]["checksum"], f"ranks hold different weights: {by_rank}"
    for rank, r in by_rank.items():
        assert float(r["loss"]) < improvement * float(r["loss0"]), f"rank {rank} did not train: {r}"
    return by_rank


def test_the_shell_launch_line_becomes_tfringrun(migrated):
    text = (migrated / "run_horovod.sh").read_text()
    assert "tfringrun -np 2 --log-level warning python horovod_tf2_keras.py" in text
    assert "TFRING_FUSION_THRESHOLD=33554432" in text and "HOROVOD" not in text


def test_horovod_keras_script_trains_after_migration(migrated):
    checkpoints = migrated / "checkpoints"
    checkpoints.mkdir()
    source = (migrated / "horovod_tf2_keras.py").read_text()
    assert "import horovod" not in source and "tfring.keras as hvd" in source
    result = run_job(2, source, timeout=180, script_args=(str(checkpoints),))
    by_rank = assert_trained_alike(result.stdout)
    assert float(by_rank[0]["lr"]) == pytest.approx(1.0), "warmup ends at the scaled learning rate"
    assert sorted(os.listdir(checkpoints)) == [f"checkpoint-{e}.h5" for e in (1, 2, 3, 4)]


def test_horovod_tf2_custom_loop_trains_after_migration(migrated):
    result = run_job(2, (migrated / "horovod_tf2_custom_loop.py").read_text(), timeout=180)
    assert_trained_alike(result.stdout)


def test_multi_worker_mirrored_strategy_script_trains_after_migration(migrated):
    source = (migrated / "mwms_keras.py").read_text()
    assert "strategy = tfring.RingStrategy()" in source and "import tfring\n" in source
    result = run_job(2, source, timeout=180)
    assert "replicas in sync: 2" in result.stdout
    assert_trained_alike(result.stdout, improvement=0.8)
