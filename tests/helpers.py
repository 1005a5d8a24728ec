"""Running real multi-process jobs from tests, through the launcher, with a hard timeout.

    from tests.helpers import run_job

    SCRIPT = '''
    import numpy as np, tfring
    tfring.init()
    print("rank", tfring.rank(), tfring.allreduce(np.ones(2)).tolist(), flush=True)
    '''

    result = run_job(2, SCRIPT, timeout=60)
    assert "rank 1 [1.0, 1.0]" in result.stdout

``run_job`` writes the script to a temporary file and runs
``python -m tfring.runner.launch -np N *args python script *script_args`` with the repo on
PYTHONPATH. Worker lines come back prefixed by the launcher (``[1]<stdout>: ...``), so
``"text" in result.stdout`` finds a rank's line; ``rank_output(result.stdout, 1)`` gives one
rank's lines without prefixes. A job that fails (with ``check=True``) or runs past
``timeout`` raises ``AssertionError`` whose message shows every rank's output, grouped by
rank, and the launcher's own lines. Nothing is left running: on timeout the launcher gets
SIGTERM (which it passes on to every worker's process group), then SIGKILL.
"""

import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCHER = [sys.executable, "-m", "tfring.runner.launch"]
STOP_WAIT_S = 15  # after a timeout: how long the launcher gets to stop its workers
MAX_LINES_PER_RANK = 200  # in failure messages

# A rank (``[1]``), or an elastic job's worker id (``[w3]``).
_PREFIX = re.compile(r"^\[(w?\d+)\]<(stdout|stderr)>: ?(.*)$")


def job_env(env=None):
    """The environment for a launcher or worker started by a test: this environment, the
    repo first on PYTHONPATH, quiet TensorFlow, one OpenMP thread, then ``env``."""
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join(p for p in (REPO_ROOT, out.get("PYTHONPATH", "")) if p)
    out["TF_CPP_MIN_LOG_LEVEL"] = "2"
    out["OMP_NUM_THREADS"] = "1"
    out.update(env or {})
    return out


def rank_output(text, rank, stream=None):
    """The lines of ``rank`` (or elastic worker id, e.g. ``"w1"``) in launcher output
    ``text`` (prefixes removed), optionally only those of ``stream`` ("stdout" or "stderr"),
    joined with newlines."""
    lines = []
    for line in text.splitlines():
        m = _PREFIX.match(line)
        if m and m.group(1) == str(rank) and stream in (None, m.group(2)):
            lines.append(m.group(3))
    return "\n".join(lines)


def format_job_output(stdout, stderr):
    """Both streams of a job grouped by rank, then the launcher's own lines; each rank's
    part ends with its last ``MAX_LINES_PER_RANK`` lines."""
    by_rank, launcher = {}, []
    for stream, text in (("stdout", stdout or ""), ("stderr", stderr or "")):
        for line in text.splitlines():
            m = _PREFIX.match(line)
            if m:
                by_rank.setdefault(m.group(1), []).append(f"<{m.group(2)}> {m.group(3)}")
            else:
                launcher.append(f"<{stream}> {line}")
    parts = []
    for rank in sorted(by_rank, key=lambda r: (r.startswith("w"), int(r.lstrip("w")))):
        lines = by_rank[rank]
        cut = len(lines) - MAX_LINES_PER_RANK
        head = [f"... ({cut} earlier lines)"] if cut > 0 else []
        label = f"worker {rank}" if rank.startswith("w") else f"rank {rank}"
        parts.append(f"----- {label} -----\n" + "\n".join(head + lines[-MAX_LINES_PER_RANK:]))
    parts.append("----- launcher and unprefixed lines -----\n" + "\n".join(launcher[-MAX_LINES_PER_RANK:]))
    return "\n".join(parts)


def _stop(proc):
    """SIGTERM to the launcher, then SIGKILL to its process group; returns its output."""
    try:
        proc.send_signal(signal.SIGTERM)
        return proc.communicate(timeout=STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            return proc.communicate(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            return "", "(output lost: the launcher did not die after SIGKILL)"


def run_job(np, script_text, timeout=120, args=(), env=None, script_args=(), check=True, fork=None):
    """Runs ``script_text`` on ``np`` ranks under tfringrun.

    Args:
      np: number of ranks.
      script_text: Python source of the worker (each rank runs the same script).
      timeout: seconds before the job is stopped and the test fails.
      args: extra launcher options, placed before the command (e.g. ``("--verbose",)``).
      env: extra environment variables for the launcher and, through it, every worker.
      script_args: arguments given to the script.
      check: raise when the launcher exits non-zero.
      fork: whether the ranks are forks of the suite's fork server (``rank_python``;
        None: when the script imports TensorFlow or Keras).

    Returns:
      ``subprocess.CompletedProcess`` with ``returncode``, ``stdout``, ``stderr`` (text).

    Raises:
      AssertionError: the job timed out, or failed with ``check=True``; the message holds
        the exit code, the command and every rank's output.
    """
    return run_launcher(["-np", str(np), *args], script_text, timeout=timeout, env=env, script_args=script_args,
                        check=check, fork=fork)


FORK_CLIENT = os.path.join(REPO_ROOT, "tests", "fork_client.py")
FORK_SERVER_ENV = "TFRING_TEST_FORK_SERVER"
_IMPORTS_TF = re.compile(r"^\s*(import|from)\s+(tensorflow|keras|tfring\.(tensorflow|keras))\b", re.MULTILINE)


def rank_python(script_text="", env=None, fork=None):
    """The command that starts a rank's Python: ``[python]``, or the fork server's client
    (tests/fork_server.py: TensorFlow and Keras imported once per pytest process) for a
    script that imports them (``script_text``; ``fork=True``: whatever it imports), when
    the suite's server runs. ``fork=False`` (or
    ``TFRING_TEST_FORK_SERVER=""`` in ``env``) keeps a fresh process: for a test of what
    only a fresh process shows (the launcher watching the rank's own process state: a
    SIGSTOPped rank; ``os.getppid()``; TensorFlow settings read at import). A signal sent
    to the stand-in reaches the forked rank a few ms later (relayed)."""
    path = (env or {}).get(FORK_SERVER_ENV, os.environ.get(FORK_SERVER_ENV))
    if fork is False or not path or (fork is None and not _IMPORTS_TF.search(script_text)):
        return [sys.executable]
    wait_for_fork_server()
    return [sys.executable, FORK_CLIENT]


def run_launcher(launcher_args, script_text, timeout=120, env=None, script_args=(), check=True, fork=None):
    """``run_job`` with the launcher's options given in full (e.g. an elastic job's
    ``--min-np 2 --max-np 3 -H ...`` instead of ``-np N``). ``fork``: see ``rank_python``."""
    with tempfile.TemporaryDirectory(prefix="tfring_job_") as tmp:
        script = os.path.join(tmp, "job.py")
        with open(script, "w") as f:
            f.write(script_text)
        cmd = [*LAUNCHER, *launcher_args, *rank_python(script_text, env, fork), script, *script_args]
        proc = subprocess.Popen(cmd, env=job_env(env), cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                encoding="utf-8", errors="replace", start_new_session=True)
        timed_out = False
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            stdout, stderr = _stop(proc)
        finally:
            if proc.poll() is None:  # interrupted (e.g. by pytest-timeout): leave nothing behind
                _stop(proc)
    result = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
    if timed_out:
        raise AssertionError(f"job timed out after {timeout} s and was stopped (exit {proc.returncode})\n"
                             f"command: {' '.join(cmd)}\n{format_job_output(stdout, stderr)}")
    if check and proc.returncode != 0:
        raise AssertionError(f"job failed with exit code {proc.returncode}\n"
                             f"command: {' '.join(cmd)}\n{format_job_output(stdout, stderr)}")
    return result


def one_tf_thread_each():
    """Sets TensorFlow's intra-op and inter-op pools to 1 thread in this (pytest) process,
    as every worker does. TF accepts this only before its context exists; when an earlier
    test module already created it (tests share one process), the pools stay as they are,
    which changes speed, not results."""
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    except RuntimeError:
        pass


def rank_executable(folder, fork=True):
    """A path that stands in for ``python`` where a product API takes one executable for its
    rank processes (``tfring.run(executable=...)``, ``tfring.spark.run(executable=...)``,
    which start ``EXECUTABLE -m tfring._runner.function_worker``): a shell script in
    ``folder`` that runs the fork server's client with the server's socket set (the product
    drops TFRING_* variables it did not set), so the ranks are forks that have TensorFlow
    imported. ``sys.executable`` when no fork server runs or ``fork=False``."""
    path = os.environ.get(FORK_SERVER_ENV)
    if not fork or not path:
        return sys.executable
    wait_for_fork_server()
    script = os.path.join(str(folder), "python_fork")
    with open(script, "w") as f:
        f.write(f'#!/bin/sh\n{FORK_SERVER_ENV}={shlex.quote(path)} exec {shlex.quote(sys.executable)} '
                f'{shlex.quote(FORK_CLIENT)} "$@"\n')
    os.chmod(script, 0o755)
    return script


# ---- the suite's fork server (tests/fork_server.py) ---------------------------------------
_fork_server = {"proc": None, "ready": False}


def start_fork_server(folder):
    """Starts this pytest process's fork server (its socket in ``folder``) and announces it
    to ``rank_python`` through ``TFRING_TEST_FORK_SERVER``; returns at once (the server
    imports TensorFlow and Keras, ~6 s, while the first tests run). Set
    ``TFRING_TEST_FORK_SERVER=0`` before pytest to run every rank as a fresh process."""
    if os.environ.get(FORK_SERVER_ENV) == "0":
        os.environ[FORK_SERVER_ENV] = ""
        return
    path = os.path.join(folder, "fork_server.sock")
    proc = subprocess.Popen([sys.executable, os.path.join(REPO_ROOT, "tests", "fork_server.py"), path],
                            env=job_env({FORK_SERVER_ENV: ""}), cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    _fork_server.update(proc=proc, ready=False)
    os.environ[FORK_SERVER_ENV] = path


def wait_for_fork_server(timeout=120):
    """Blocks until the fork server accepts (at most ``timeout`` s); raises AssertionError
    naming its exit code when it died or did not come up."""
    proc = _fork_server["proc"]
    if proc is None or _fork_server["ready"]:
        return
    import selectors

    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            raise AssertionError(f"the fork server (tests/fork_server.py) did not come up in {timeout} s")
    line = proc.stdout.readline()
    if line.strip() != "READY":
        raise AssertionError(f"the fork server (tests/fork_server.py) failed: exit {proc.poll()}, said {line!r}")
    _fork_server["ready"] = True


def stop_fork_server():
    """Ends the fork server (SIGKILL to its process group; its children run on until their
    clients end them)."""
    proc = _fork_server["proc"]
    if proc is not None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        _fork_server["proc"] = None
