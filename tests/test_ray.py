"""tfring on a local Ray (tfring.ray): TfringTrainer (Ray Train V2) and RayExecutor.

One Ray instance (2 CPUs) serves the single-node tests; test_trainer_on_two_ray_nodes starts a
two-node Ray cluster on this machine, and the last two run scripts that start their own Ray
(examples/ray_keras.py, and Horovod's Ray example after tfring-migrate). RayExecutor's
Horovod arguments are also checked without a cluster. The worker functions are in
tests/workers/ray_fns.py.
"""

import glob
import json
import os
import time

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (pip install tfring[ray])")
pytest.importorskip("tfring.tensorflow", reason="the TF op library (tfring.tensorflow) is not built")

from ray.train import FailureConfig, RunConfig, ScalingConfig

from tests.helpers import REPO_ROOT, job_env, rank_python
from tests.workers import ray_fns
from tfring._engines.ray import job
from tfring.ray import RayExecutor, TfringConfig, TfringTrainer

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(240)]
WORKERS = os.path.join(REPO_ROOT, "tests", "workers")


def _runtime_env():
    env = job_env()
    keep = ("PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL", "OMP_NUM_THREADS")
    return {"env_vars": {k: env[k] for k in keep}}


def _ray_init(**kwargs):
    ray.init(include_dashboard=False, runtime_env=_runtime_env(), log_to_driver=False,
             configure_logging=False, **kwargs)


@pytest.fixture(scope="module")
def local_ray():
    # address="local": a Ray of this module's own, never one another process on the machine
    # left behind (/tmp/ray/ray_current_cluster) or started meanwhile, which a plain
    # ray.init() would join (and then refuses num_cpus).
    _ray_init(address="local", num_cpus=2)
    yield
    ray.shutdown()


def _fit(fn, tmp_path, config, workers=2, max_failures=0, settings=None):
    trainer = TfringTrainer(
        fn, train_loop_config=config, tfring_config=TfringConfig(settings=settings or {}),
        scaling_config=ScalingConfig(num_workers=workers),
        run_config=RunConfig(storage_path=str(tmp_path / "ray_results"), name="job",
                             failure_config=FailureConfig(max_failures=max_failures)))
    return trainer.fit()


def _results(folder):
    out = {}
    for path in glob.glob(os.path.join(folder, "rank.*.json")):
        with open(path) as f:
            r = json.load(f)
        out[r["rank"]] = r
    return out


def test_trainer_fit_equals_tfringrun_and_ranks_are_rays(local_ray, tmp_path):
    on_ray, on_tfringrun = tmp_path / "ray", tmp_path / "tfringrun"
    on_ray.mkdir()
    on_tfringrun.mkdir()
    _fit(ray_fns.keras_digits, tmp_path, {"out_dir": str(on_ray)}, settings={"timeout_s": 60})
    ray_results = _results(on_ray)
    assert sorted(ray_results) == [0, 1]
    for rank, r in ray_results.items():
        assert (r["size"], r["ray_world_rank"], r["ray_world_size"]) == (2, rank, 2)
        assert (r["local_rank"], r["local_size"]) == (r["ray_local_rank"], 2), "one node: local ranks as Ray's"
    assert ray_results[0]["weights"] == ray_results[1]["weights"], "one model on every worker"
    assert ray_results[0]["loss"][-1] < ray_results[0]["loss"][0]

    import subprocess
    import sys

    launched = subprocess.run(
        [sys.executable, "-m", "tfring.runner.launch", "-np", "2", *rank_python(fork=True),
         os.path.join(WORKERS, "ray_fns.py"), str(on_tfringrun)],
        env=job_env(), cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert launched.returncode == 0, launched.stdout + launched.stderr
    reference = _results(on_tfringrun)
    assert reference[0]["weights"] == ray_results[0]["weights"], "TfringTrainer trains what tfringrun trains"
    assert reference[0]["loss"] == ray_results[0]["loss"]


def test_a_raising_worker_fails_fit_within_5_s_naming_the_rank(local_ray, tmp_path):
    raised_at, rank0_error = tmp_path / "raised_at", tmp_path / "rank0_error"
    with pytest.raises(Exception) as info:
        _fit(ray_fns.raise_on_rank_1, tmp_path, {"raised_at": str(raised_at), "rank0_error": str(rank0_error)})
    failed_after = time.time() - float(raised_at.read_text())
    text = str(info.value)
    assert "boom on purpose" in text, text
    assert failed_after < 5.0, f"fit() raised {failed_after:.1f} s after the worker did"
    # Rank 0's own error names the peer that left and why (tfring.shutdown(reason)). Ray's
    # report carries it when Ray saw rank 0 fail before stopping the group; the file always.
    deadline = time.time() + 5
    while not rank0_error.exists() and time.time() < deadline:
        time.sleep(0.05)
    assert rank0_error.exists(), f"rank 0's collective did not fail within 5 s: {text}"
    assert "rank 1 exited: ValueError: boom on purpose" in rank0_error.read_text(), rank0_error.read_text()


def test_max_failures_restarts_on_a_fresh_store(local_ray, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    _fit(ray_fns.fail_first_attempt, tmp_path, {"marker": str(tmp_path / "failed_once"), "out_dir": str(out)},
         max_failures=1)
    assert (tmp_path / "failed_once").exists(), "the first attempt failed"
    assert sorted(os.listdir(out)) == ["ok.0", "ok.1"]
    assert (out / "ok.0").read_text() == "[2.0, 2.0]"


def test_ray_executor_runs_a_function_on_every_rank(local_ray):
    executor = RayExecutor(num_workers=2, settings={"timeout_s": 60})
    executor.start()
    try:
        results = executor.run(ray_fns.executor_allreduce, args=[10.0])
        assert results == [{"rank": 0, "size": 2, "sum": 30.0}, {"rank": 1, "size": 2, "sum": 30.0}]
        assert executor.execute(lambda executable: executable) == [None, None]
        with pytest.raises(ray.exceptions.RayTaskError, match="no such shard"):
            executor.run(ray_fns.executor_raise, args=[None])
    finally:
        executor.shutdown()
    with pytest.raises(RuntimeError, match="start"):
        executor.run(ray_fns.executor_allreduce, args=[1.0])


def test_ray_executor_reports_a_placement_it_cannot_get(local_ray):
    """num_hosts=2 needs two Ray nodes (STRICT_SPREAD); this Ray has one. No actor starts."""
    settings = RayExecutor.create_settings(timeout_s=30, placement_group_timeout_s=1)
    executor = RayExecutor(settings, num_hosts=2, num_workers_per_host=1)
    with pytest.raises(TimeoutError, match=r"STRICT_SPREAD placement group: 2 different Ray nodes .*"
                                           r"placement_group_timeout_s=1\b"):
        executor.start()
    assert executor.workers == [] and executor._placement_group is None, "start() cleaned up after itself"


# ---- Horovod's RayExecutor arguments, checked without a cluster ---------------------------

def test_create_settings_is_horovods_and_maps_to_tfring(tmp_path):
    settings = RayExecutor.create_settings(timeout_s=30)
    assert (settings.timeout_s, settings.placement_group_timeout_s, settings.nics) == (30, 100, None)
    assert RayExecutor.create_settings().timeout_s == 30, "Horovod 0.28's default"
    executor = RayExecutor(settings, num_workers=2, use_gpu=False)
    assert executor.settings == {"start_timeout_s": 30}, "timeout_s is the rendezvous timeout"
    assert (executor.num_workers, executor.placement_group_timeout_s, executor.nics) == (2, 100, None)
    settings = RayExecutor.create_settings(timeout_s=5, placement_group_timeout_s=7, nics={"lo"})
    assert (RayExecutor(settings).placement_group_timeout_s, RayExecutor(settings).nics) == (7, {"lo"})
    key = tmp_path / "id_rsa"
    with pytest.warns(UserWarning, match="ssh_identity_file and ssh_str are ignored"):
        RayExecutor.create_settings(timeout_s=30, ssh_identity_file=str(key), ssh_str="PRIVATE KEY")
    assert not key.exists(), "no private key is written"
    with pytest.raises(TypeError, match=r"nics=\{'eth0'\}"):
        RayExecutor.create_settings(nics="eth0")
    # tfring's own settings dict keeps its meaning
    assert RayExecutor({"timeout_s": 60}).settings == {"timeout_s": 60}
    with pytest.raises(TypeError, match="create_settings"):
        RayExecutor("timeout_s=30")


def test_ray_executor_takes_horovods_arguments_or_names_the_fix():
    assert RayExecutor(None).num_workers == 1
    executor = RayExecutor(None, num_hosts=2, num_workers_per_host=3, cpus_per_worker=2)
    assert (executor.num_workers, executor.num_hosts, executor.num_workers_per_host) == (6, 2, 3)
    assert RayExecutor(None, num_workers=2, use_gpu=True).gpus_per_worker == 1
    refused = [
        ({"num_workers": 2, "num_hosts": 1}, ValueError, r"num_workers=2, num_hosts=1\): pass one of them"),
        ({"num_workers_per_host": 2}, ValueError, r"num_workers_per_host=2\) is used only with num_hosts"),
        ({"num_hosts": 0}, ValueError, "num_hosts >= 1"),
        ({"num_workers": 0}, ValueError, "num_workers >= 1"),
        ({"gpus_per_worker": 2}, ValueError, r"gpus_per_worker=2\) needs use_gpu=True"),
        ({"min_workers": 1, "max_workers": 4}, ValueError, r"min_workers=1\) asks for Horovod's elastic mode"),
        ({"max_workers": 4}, ValueError, "max_workers=4.*TfringTrainer.*FailureConfig.*--min-np"),
        ({"reset_limit": 3}, ValueError, "reset_limit=3"),
        ({"cooldown_range": [1, 2]}, ValueError, r"cooldown_range=\[1, 2\]"),
    ]
    for kwargs, error, message in refused:
        with pytest.raises(error, match=message):
            RayExecutor(RayExecutor.create_settings(timeout_s=30), **kwargs)
    RayExecutor(None, num_workers=2, elastic_timeout=60, override_discovery=False)  # unused without min_workers
    with pytest.warns(UserWarning, match="callbacks are not called"), pytest.raises(RuntimeError, match="start"):
        RayExecutor(None).run(print, callbacks=[print])


def test_ray_job_helpers_for_nics_and_shared_gpus():
    assert job.shared_cuda_devices(["a", "b", "a"], [["0"], ["1"], ["3"]]) == ["0,3", "1", "0,3"]
    assert job.shared_cuda_devices(["a", "a"], [["0"], ["0"]]) == ["0", "0"], "a shared fractional GPU, once"
    assert job.nic_address({"lo"}) == "127.0.0.1"
    assert job.nic_address({"lo", "no_such_nic0"}) == "127.0.0.1"
    with pytest.raises(ValueError, match=r"nics=\['no_such_nic0'\]: none of these interfaces"):
        job.nic_address({"no_such_nic0"})


def test_trainer_on_two_ray_nodes(tmp_path):
    """Two Ray nodes on this machine (ray.cluster_utils.Cluster), one worker each."""
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        cluster.add_node(num_cpus=1)
        _ray_init(address=cluster.address)
        out = tmp_path / "out"
        out.mkdir()
        _fit(ray_fns.keras_digits, tmp_path, {"out_dir": str(out)})
        results = _results(out)
        assert results[0]["node_id"] != results[1]["node_id"], "one worker per Ray node"
        assert results[0]["weights"] == results[1]["weights"]
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_ray_keras_example_runs_by_one_command(tmp_path):
    """examples/ray_keras.py starts its own local Ray (run last: no other Ray is up)."""
    import re
    import subprocess
    import sys

    if ray.is_initialized():
        ray.shutdown()
    result = subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, "examples", "ray_keras.py"), "--num-workers", "2",
         "--base-epochs", "4", "--storage-path", str(tmp_path / "runs")],
        cwd=tmp_path, env=job_env(), capture_output=True, text=True, timeout=180, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    accuracy = float(re.search(r"Ranks: 2, epochs: 2, test loss: \S+, test accuracy: (\S+)", result.stdout).group(1))
    assert accuracy > 0.7, result.stdout  # 2 epochs: 0.89-0.91 measured; chance is 0.1
    assert re.search(r"Model: .*model\.keras", result.stdout)


def test_horovods_ray_example_runs_after_tfring_migrate(tmp_path):
    """tests/migrate_inputs/horovod_ray_tf2_mnist.py is Horovod's examples/ray/tensorflow2_mnist_ray.py
    (create_settings(timeout_s=30), RayExecutor(settings, num_hosts=1, num_workers_per_host=2),
    start, run, shutdown) on digits: after tfring-migrate it runs as it is and starts its own Ray."""
    import shutil
    import subprocess
    import sys

    if ray.is_initialized():
        ray.shutdown()
    script = tmp_path / "horovod_ray_tf2_mnist.py"
    shutil.copy(os.path.join(REPO_ROOT, "tests", "migrate_inputs", script.name), script)
    migrated = subprocess.run([sys.executable, "-m", "tfring._migrate.cli", "--write", str(script)], cwd=tmp_path,
                              env=job_env(), capture_output=True, text=True, timeout=60, check=False)
    assert migrated.returncode == 0 and "0 manual edit(s) left" in migrated.stderr, migrated.stderr
    source = script.read_text()
    assert "from tfring.ray import RayExecutor" in source and "import horovod" not in source
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    result = subprocess.run(
        [sys.executable, str(script), "--num-hosts", "1", "--num-workers-per-host", "2", "--epochs", "2",
         "--checkpoint-dir", str(checkpoints)],
        cwd=tmp_path, env=job_env(), capture_output=True, text=True, timeout=200, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    by_rank = {}
    for line in result.stdout.splitlines():
        if line.startswith("RESULT "):
            r = dict(item.split("=") for item in line.split()[1:])
            by_rank[int(r["rank"])] = r
    assert sorted(by_rank) == [0, 1], result.stdout
    for rank, r in by_rank.items():
        assert (r["size"], r["local_rank"], r["local_size"]) == ("2", str(rank), "2"), r
        assert float(r["loss"]) < float(r["loss0"]), f"rank {rank} did not train: {r}"
    assert by_rank[0]["checksum"] == by_rank[1]["checksum"], "one model on both ranks"
    assert sorted(os.listdir(checkpoints)) == ["checkpoint-1.h5", "checkpoint-2.h5"]
