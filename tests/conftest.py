"""pytest setup: the repo root goes first on sys.path so ``import tfring`` and
``from tests.helpers import run_job`` use this checkout; the ``lab`` fixture of the
host-fault tests (tests/host_lab.py). Nothing heavy here (no TensorFlow)."""

import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

from tests.helpers import start_fork_server, stop_fork_server
from tests.host_lab import lab  # noqa: F401 -- the emulated hosts of the host-fault tests


@pytest.fixture(scope="session", autouse=True)
def fork_server(tmp_path_factory):
    """This pytest process's fork server for rank processes that import TensorFlow
    (tests/fork_server.py, used by tests.helpers.run_job/run_launcher)."""
    start_fork_server(str(tmp_path_factory.mktemp("fork_server")))
    yield
    stop_fork_server()


@pytest.fixture(scope="session")
def fake_gpu_env(tmp_path_factory):
    """The environment of a process that runs tfring's GPU path on tests/fake_gpu's CPU
    stand-ins for libcudart and libnccl (built once per session, ~2 s): os.environ with
    TFRING_CUDA_RUNTIME_LIBRARY and TFRING_NCCL_LIBRARY naming them, the repo on PYTHONPATH
    and TFRING_FAKE_GPU=1. Used by tests/test_gpu_nccl.py and tests/test_xla_cuda_fake.py."""
    out = tmp_path_factory.mktemp("fake_gpu")
    env = {}
    for name, setting in (("cudart", "TFRING_CUDA_RUNTIME_LIBRARY"), ("nccl", "TFRING_NCCL_LIBRARY")):
        lib = str(out / f"libfake_{name}.so")
        subprocess.run(["g++", "-std=c++17", "-shared", "-fPIC", "-O1", "-o", lib,
                        os.path.join(REPO_ROOT, "tests", "fake_gpu", f"fake_{name}.cc")], check=True)
        env[setting] = lib
    return dict(os.environ, PYTHONPATH=REPO_ROOT, TFRING_FAKE_GPU="1", **env)

# ---- skip policy -------------------------------------------------------------------------
# Only GPU tests may skip in CI: a skipped multi-host, MPI or fault test would hide a launch
# path that nobody then tests. GPU tests are those marked ``gpu`` or living in
# test_gpu_nccl.py. The summary always says how many of each skipped; with
# TFRING_REQUIRE_NO_SKIPS=1 (set by .ci/run) any other skip fails the run, naming it.

_skips = {"gpu": [], "other": []}


def _is_gpu_test(report):
    return "gpu" in report.keywords or report.nodeid.startswith("tests/test_gpu_nccl.py")


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        _skips["gpu" if _is_gpu_test(report) else "other"].append(report)


def _skip_reason(report):
    longrepr = report.longrepr
    return longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)


def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("TFRING_REQUIRE_NO_SKIPS") == "1" and _skips["other"] and exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    gpu, other = _skips["gpu"], _skips["other"]
    if not gpu and not other:
        return
    terminalreporter.section("skip summary")
    terminalreporter.write_line(f"{len(gpu)} GPU test(s) skipped (no usable GPU, NCCL or CUDA runtime here)")
    if other:
        strict = os.environ.get("TFRING_REQUIRE_NO_SKIPS") == "1"
        terminalreporter.write_line(f"{len(other)} other test(s) skipped" +
                                    (": NOT ALLOWED in CI (TFRING_REQUIRE_NO_SKIPS=1)" if strict else ":"))
        for r in other:
            terminalreporter.write_line(f"  {r.nodeid}: {_skip_reason(r)}")
    else:
        terminalreporter.write_line("no other test skipped")
