"""The tf.data compute service: a compute job of 2 ranks (tfringrun ... compute_worker) and
training jobs of 2 ranks that read through it. With ``reuse_dataset`` the training ranks
share one tf.data job, so each gets its own share of a dataset (disjoint, together the
whole; without it every rank reads the whole dataset, as in Horovod), and examples/
tensorflow2_data_service.py trains to identical weights on both ranks, then shuts the
compute job down (it must exit 0). A training side that cannot reach the registry names
the config file, the registry's address and, when the compute job gave up waiting for its
dispatcher, that (from ``<config>.stopped``). Every wait is bounded; ranks use one thread each.
"""

import os
import signal
import subprocess
import sys

import pytest

from tests.helpers import rank_executable, rank_python
from tests.ports import unused_port

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(200)]

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1",
       "TF_NUM_INTEROP_THREADS": "1"}


def _read_share(config):
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import tfring
    from tfring._tensorflow.data.compute_service import send_to_data_service  # noqa: F401 - adds the method

    tfring.init()
    ds = tf.data.Dataset.range(40).send_to_data_service(config, tfring.rank(), tfring.size(), reuse_dataset=True)
    got = sorted(int(x) for x in ds)
    tfring.barrier()  # keep the dispatcher's job until every rank has read its share
    return got


@pytest.fixture
def compute_job(tmp_path):
    config_file = tmp_path / "compute.json"
    tfringrun = os.path.join(os.path.dirname(sys.executable), "tfringrun")
    # The ranks (here, of tfring.run below, and in the next test) are forks of the suite's
    # fork server, which has TensorFlow imported (tests/fork_server.py).
    proc = subprocess.Popen([tfringrun, "-np", "2", *rank_python(fork=True), "-m", "tfring.tensorflow.data.compute_worker",
                             str(config_file), "--timeout", "90"], env=dict(os.environ, **ENV),
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        yield proc, config_file
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)


def test_shares_then_the_example_trains_identical_weights(compute_job, monkeypatch, tmp_path):
    import tfring
    from tfring._tensorflow.data.compute_service import TfDataServiceConfig

    proc, config_file = compute_job
    config = TfDataServiceConfig.read(str(config_file), wait_for_file_creation=True, timeout=90)
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    shares = tfring.run(_read_share, args=(config,), np=2, executable=rank_executable(tmp_path))
    assert not set(shares[0]) & set(shares[1]), shares
    assert sorted(shares[0] + shares[1]) == list(range(40)), shares

    # the example's driver imports TensorFlow too: a fork (its tfring.run ranks are fresh processes)
    example = subprocess.run([*rank_python(fork=True), os.path.join(REPO, "examples", "tensorflow2_data_service.py"),
                              "--compute-service-config-file", str(config_file), "--training-tasks", "2",
                              "--reuse-dataset", "--steps", "4", "--epochs", "2"],
                             env=dict(os.environ, **ENV), capture_output=True, text=True, timeout=150, check=False)
    assert example.returncode == 0, example.stdout + example.stderr
    assert "identical weights: True" in example.stdout, example.stdout
    assert "[0]<stdout>: Epoch 2/2" in example.stdout, example.stdout
    # the example's shutdown() ends the compute job, which removes its config file
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert not config_file.exists()


def test_unreachable_registry_names_the_config_file_and_why_the_compute_job_stopped(tmp_path):
    from tfring._tensorflow.data.compute_service import TfDataServiceConfig

    # a config file whose registry is not there (a compute job killed without cleaning up)
    stale = tmp_path / "stale.json"
    port = unused_port()
    TfDataServiceConfig(dispatchers=1, workers_per_dispatcher=1, dispatcher_side="compute",
                        addresses={"store": [("127.0.0.1", port)]}, key=b"ab" * 32, timeout=1).write(str(stale))
    with pytest.raises(TimeoutError) as info:
        TfDataServiceConfig.read(str(stale)).compute_client()
    message = str(info.value)
    assert f"cannot reach the tf.data compute job's registry at 127.0.0.1:{port} (from the config file {stale})" \
        in message, message
    assert "Is the compute job that wrote it still running" in message, message
    assert "TFRING_STORE_ADDR" not in message, message

    # a compute job that gave up waiting for its training-side dispatcher: its registry is
    # gone, and the training side's errors say why
    config_file = tmp_path / "compute.json"
    proc = subprocess.Popen([*rank_python(fork=True), "-m", "tfring.tensorflow.data.compute_worker", str(config_file),
                             "--dispatcher-side", "training", "--timeout", "3"], env=dict(os.environ, **ENV),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        config = TfDataServiceConfig.read(str(config_file), wait_for_file_creation=True, timeout=90)
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode != 0, out
    gave_up = "compute rank 0 gave up waiting for tf.data dispatcher 0 after 3 s"
    assert gave_up in out, out
    assert not config_file.exists()
    (host, port), = config.addresses["store"]
    with pytest.raises(TimeoutError) as info:
        config.compute_client()
    message = str(info.value)
    assert f"registry at {host}:{port} (from the config file {config_file})" in message, message
    assert f"The compute job whose registry was at {host}:{port} stopped at" in message, message
    assert gave_up in message and "is the training job running?" in message, message
    assert "TFRING_STORE_ADDR" not in message, message
    # a training job that starts after it is told the same
    with pytest.raises(TimeoutError, match=f"the last one to use this file: .*{gave_up}"):
        TfDataServiceConfig.read(str(config_file), wait_for_file_creation=True, timeout=0.5)
