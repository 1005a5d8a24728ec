"""The TensorFlow examples run to completion on 2 ranks and end with identical weights on
every rank (examples/tensorflow2_digits.py, examples/tf1_monitored_session.py)."""

import os
import re

import pytest

from tests.helpers import REPO_ROOT, run_job

pytest.importorskip("tensorflow")
pytest.importorskip("sklearn")


def _example(name):
    with open(os.path.join(REPO_ROOT, "examples", name)) as f:
        return f.read()


def _checksums(stdout, pattern):
    return {int(r): v for r, v in re.findall(r"rank (\d+): .*" + pattern + r" (-?[\d.]+)", stdout)}


@pytest.mark.multiprocess
@pytest.mark.timeout(150)
def test_tensorflow2_digits_ends_with_identical_weights(tmp_path):
    result = run_job(2, _example("tensorflow2_digits.py"), timeout=120,
                     script_args=("--epochs", "2", "--checkpoint-dir", str(tmp_path / "ckpt")))
    sums = _checksums(result.stdout, "weights checksum")
    assert set(sums) == {0, 1} and sums[0] == sums[1], result.stdout
    assert "epoch 2: loss" in result.stdout
    accuracy = [float(a) for a in re.findall(r"accuracy ([\d.]+)", result.stdout)]
    assert accuracy and min(accuracy) > 0.7, result.stdout
    assert any(name.startswith("ckpt-2") for name in os.listdir(tmp_path / "ckpt"))


@pytest.mark.multiprocess
@pytest.mark.timeout(150)
def test_tf1_monitored_session_ends_with_identical_variables(tmp_path):
    ckpt = tmp_path / "tf1"
    result = run_job(2, _example("tf1_monitored_session.py"), timeout=120,
                     script_args=("--steps", "400", "--checkpoint-dir", str(ckpt)))
    sums = _checksums(result.stdout, "final variables checksum")
    assert set(sums) == {0, 1} and sums[0] == sums[1], result.stdout
    assert "step 150: loss" in result.stdout
    # only rank 0 wrote checkpoints, at the last step (400 / 2 ranks)
    assert (ckpt / "model.ckpt-200.index").exists(), sorted(os.listdir(ckpt))


@pytest.mark.multiprocess
@pytest.mark.timeout(150)
def test_horovod_keras_mnist_style_example_trains_and_differs_from_horovod_only_in_its_import(tmp_path):
    import subprocess
    import sys

    from tests.helpers import job_env

    source = _example("horovod_keras_mnist_style.py")
    horovod_script = source.replace("\nimport tfring.keras as hvd\n", "\nimport horovod.tensorflow.keras as hvd\n")
    assert horovod_script != source
    # A Horovod script with this body needs no edit but its import: tfring-migrate makes that
    # one edit and lists nothing for the user.
    (tmp_path / "script.py").write_text(horovod_script)
    migrated = subprocess.run([sys.executable, "-m", "tfring._migrate.cli", "--write", "script.py"], cwd=tmp_path,
                              env=job_env(), capture_output=True, text=True, timeout=60, check=False)
    assert migrated.returncode == 0, migrated.stderr
    assert (tmp_path / "script.py").read_text() == source
    result = run_job(2, source, timeout=120, script_args=(str(tmp_path / "ckpt"),))
    accuracy = float(re.search(r"Test accuracy: ([\d.]+)", result.stdout).group(1))
    assert accuracy > 0.9, result.stdout
    assert sorted(os.listdir(tmp_path / "ckpt")) == [f"checkpoint-{e}.keras" for e in range(1, 9)]
