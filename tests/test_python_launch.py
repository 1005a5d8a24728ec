"""tfring.run(fn, np=2): results by rank, a rank's exception re-raised with its rank and
traceback, clear errors for what cannot be pickled, the source of functions sent by value
on the ranks (AutoGraph converts a script's ``Dataset.map`` function with ``if``; tracebacks
show source lines), and the same from a real Jupyter kernel (nbclient + ipykernel): a Keras
fit whose rank-0 progress shows in the cell, AutoGraph on a cell's function, and a kernel
interrupt that stops every rank.

Every wait is bounded; ranks use one intra/inter-op thread.
"""

import os
import subprocess
import sys
import threading
import time

import pytest

import tfring
from tests.helpers import job_env
from tfring._runner.function_job import RankError

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(110)]

THREADS = {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1", "OMP_NUM_THREADS": "1"}


def _rank_times(x):
    import os

    return int(os.environ["TFRING_RANK"]) * x


def _raise_on_rank_1():
    import os

    if os.environ["TFRING_RANK"] == "1":
        raise ValueError("bad shard on rank 1")
    time.sleep(0.5)
    return "ok"


def test_results_by_rank_and_a_lambda():
    assert tfring.run(_rank_times, args=(10,), np=2) == [0, 10]
    base = 5
    assert tfring.run(lambda: base + 1, np=2) == [6, 6]  # a closure, sent by value


def test_a_rank_exception_names_the_rank_with_its_traceback():
    with pytest.raises(RankError) as info:
        tfring.run(_raise_on_rank_1, np=2)
    assert info.value.rank == 1
    assert "rank 1 raised ValueError: bad shard on rank 1" in str(info.value)
    assert "_raise_on_rank_1" in info.value.remote_traceback
    assert isinstance(info.value.__cause__, ValueError)


def test_run_starts_the_job_without_a_command_line(monkeypatch):
    """tfring.run calls the launcher's Python API (args.options, launch.launch_job): it
    neither builds nor parses a tfringrun command line."""
    from tfring._runner import args

    def no_command_line(argv):
        raise AssertionError(f"tfring.run parsed a command line: {argv}")

    monkeypatch.setattr(args, "parse", no_command_line)
    assert tfring.run(_rank_times, args=(7,), np=2) == [0, 7]
    with pytest.raises(ValueError, match="tfring.run: --max-np 1 is below --min-np 2"):
        tfring.run(_rank_times, args=(7,), min_np=2, max_np=1)


def test_unpicklable_argument_is_named():
    with pytest.raises(TypeError, match=r"cannot send kwargs\['lock'\] \(lock\)"):
        tfring.run(_rank_times, kwargs={"lock": threading.Lock()}, np=2)
    with pytest.raises(TypeError, match=r"cannot send fn"):
        tfring.run(_Unpicklable(), np=2)


class _Unpicklable:
    def __call__(self):
        return 1

    def __reduce__(self):
        raise TypeError("no pickling for this one")


def test_mpi_options_are_refused():
    with pytest.raises(ValueError, match="use_mpi"):
        tfring.run(_rank_times, args=(1,), np=2, use_mpi=True)


def test_more_ranks_than_cpus_warns_once(monkeypatch, capfd):
    from tfring._runner import binding

    monkeypatch.setattr(binding, "cpu_count", lambda: 2)  # the launcher runs in this process
    assert tfring.run(_rank_times, args=(1,), np=3) == [0, 1, 2]
    err = capfd.readouterr().err
    assert err.count("ranks on this host") == 1, err
    assert "warning: 3 ranks on this host, which has 2 CPUs" in err and "tfring.run(np=2)" in err
    assert tfring.run(_rank_times, args=(1,), np=2) == [0, 1]
    assert "ranks on this host" not in capfd.readouterr().err


# AutoGraph converts `if x > 2:` on a tensor only when it can read the function's source:
# in one process this map gives [0, 1, 2, 30, 40].
MAP_FUNCTION = """
def times_ten_above_two(x):
    if x > 2:
        return x * 10
    else:
        return x

def mapped():
    import tensorflow as tf
    return [int(v) for v in tf.data.Dataset.range(5).map(times_ten_above_two)]
"""

SOURCE_SCRIPT = MAP_FUNCTION + """
import tfring
from tfring._runner.function_job import RankError

def fails():
    raise LookupError("no shard " + "for this rank")

print("mapped:", tfring.run(mapped, np=2), flush=True)
try:
    tfring.run(fails, np=2)
except RankError as e:
    print("remote traceback:", e.remote_traceback, flush=True)
"""


def test_functions_of_a_script_keep_their_source_on_the_ranks(tmp_path):
    """A script's functions travel by value; the ranks get their source (issue 47 item 7)."""
    script = tmp_path / "train.py"
    script.write_text(SOURCE_SCRIPT)
    out = subprocess.run([sys.executable, str(script)], check=False, env=job_env(THREADS), cwd=tmp_path,
                         capture_output=True, text=True, timeout=100)
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    assert "mapped: [[0, 1, 2, 30, 40], [0, 1, 2, 30, 40]]" in out.stdout, text
    traceback_text = out.stdout.split("remote traceback:", 1)[-1]
    assert f'File "<tfring.run:{script}>", line ' in traceback_text, text
    assert 'raise LookupError("no shard " + "for this rank")' in traceback_text, text


CELL = """
def outer(x):
    scale = lambda v: v * 3
    return scale(x)
"""


def test_pack_sends_the_source_of_a_cell_under_the_callers_name():
    """In one process: code from a file no module has (here a fake notebook cell in
    linecache, as IPython registers cells) travels with its lines, renamed
    ``<caller:path>``, nested lambda included; ``unpack`` registers them."""
    import inspect
    import linecache

    from tfring._runner import function_job

    path = "/nonexistent/ipykernel_0/4242.py"
    linecache.cache[path] = (len(CELL), None, CELL.splitlines(keepends=True), path)
    namespace = {"__name__": "__main__"}
    try:
        exec(compile(CELL, path, "exec"), namespace)  # noqa: S102 - a notebook cell runs this way
        payload = function_job.pack(namespace["outer"], (2,), {}, caller="tfring.spark.run")
    finally:
        del linecache.cache[path]
    name = f"<tfring.spark.run:{path}>"
    linecache.cache.pop(name, None)
    fn, args, kwargs = function_job.unpack(payload)
    assert (fn(*args, **kwargs), fn.__code__.co_filename) == (6, name)
    assert inspect.getsource(fn) == CELL.lstrip("\n")
    lambda_code = next(c for c in fn.__code__.co_consts if inspect.iscode(c))
    assert lambda_code.co_filename == name


# --- a real notebook ---------------------------------------------------------------------

FIT_CELL = """
import numpy as np
import tfring

def train(epochs):
    import os
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import keras
    import tfring.keras as hvd
    hvd.init()
    keras.utils.set_random_seed(hvd.rank())  # different starts: the broadcast must align them
    x = np.random.RandomState(hvd.rank()).rand(64, 4).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse")
    model.fit(x, y, batch_size=16, epochs=epochs, verbose=2 if hvd.rank() == 0 else 0,
              callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)])
    return [w.tolist() for w in model.get_weights()]

weights = tfring.run(train, args=(2,), np=2)
print("ranks:", len(weights), "identical:", weights[0] == weights[1])
"""

FAIL_CELL = """
def fails():
    import os
    if os.environ["TFRING_RANK"] == "1":
        raise KeyError("missing column on rank 1")
    return 0

tfring.run(fails, np=2)
"""

AUTOGRAPH_CELL = MAP_FUNCTION + """
print("mapped:", tfring.run(mapped, np=2))
"""


def _notebook_tools():
    """nbformat and nbclient's NotebookClient; fails (CI installs them, never skips) naming
    the install when nbclient or ipykernel is missing."""
    try:
        import ipykernel  # noqa: F401 - the kernel the notebook runs in
        import nbformat
        from nbclient import NotebookClient
    except ImportError as e:
        pytest.fail(f"the notebook tests need nbclient and ipykernel ({e}): .venv/bin/pip install nbclient "
                    "ipykernel (both are in requirements.txt)", pytrace=False)
    return nbformat, NotebookClient


def _kernel_env():
    env = dict(os.environ, **THREADS)
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return env


def _cell_text(cell):
    parts = []
    for out in cell.get("outputs", []):
        parts.append(out.get("text", ""))
        parts.extend(out.get("traceback", []))
        parts.append(str(out.get("evalue", "")))
    return "".join(parts)


def test_notebook_runs_fit_and_reports_a_failing_rank(tmp_path):
    """Also: the ranks get the source of the cells' functions (issue 47 item 7): AutoGraph
    converts a map function, the failing rank's traceback shows the line that raised."""
    nbformat, NotebookClient = _notebook_tools()

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(cell) for cell in (FIT_CELL, FAIL_CELL, AUTOGRAPH_CELL)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    client = NotebookClient(nb, timeout=90, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}},
                            allow_errors=True)
    started = time.monotonic()
    client.execute(env=_kernel_env())
    fit, fail, autograph = (_cell_text(c) for c in nb.cells)
    assert "ranks: 2 identical: True" in fit, fit
    assert "[0]<stdout>: Epoch 1/2" in fit, fit  # rank 0's Keras progress, in the cell
    assert "[1]<stdout>: Epoch" not in fit
    assert "RankError" in fail and "rank 1 raised KeyError" in fail and "missing column on rank 1" in fail, fail
    assert "Traceback on rank 1" in fail, fail
    assert 'raise KeyError("missing column on rank 1")' in fail, fail  # the cell's line, shown by the rank
    assert "mapped: [[0, 1, 2, 30, 40], [0, 1, 2, 30, 40]]" in autograph, autograph
    assert time.monotonic() - started < 90


INTERRUPT_CELL = """
import os, time, tfring
def forever(directory):
    import os, time
    open(os.path.join(directory, "pid." + os.environ["TFRING_RANK"]), "w").write(str(os.getpid()))
    time.sleep(600)
tfring.run(forever, args=({directory!r},), np=2)
"""


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purpose
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_kernel_interrupt_stops_every_rank(tmp_path):
    _notebook_tools()
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", env=_kernel_env(), startup_timeout=60)
    try:
        msg_id = kc.execute(INTERRUPT_CELL.format(directory=str(tmp_path)))
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("pid.*"))) < 2:
            assert time.monotonic() < deadline, "the ranks did not start within 60 s"
            time.sleep(0.1)
        pids = [int(p.read_text()) for p in tmp_path.glob("pid.*")]
        km.interrupt_kernel()
        ename, text = None, ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            content = msg["content"]
            text += content.get("text", "")
            if msg["msg_type"] == "error":
                ename = content["ename"]
            if msg["msg_type"] == "status" and content["execution_state"] == "idle":
                break
        assert ename == "KeyboardInterrupt", text
        assert "got SIGINT; passing it on to 2 rank(s)" in text, text
        assert not [p for p in pids if _alive(p)], f"ranks still running after the interrupt: {pids}"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_horovod_runner_shape_in_local_mode():
    from tfring.spark import TfringRunner

    assert TfringRunner(np=-2).run(_rank_times, x=3) == 0  # rank 0's result, as HorovodRunner
    with pytest.raises(ValueError, match="np > 0"):
        TfringRunner(np=0)


def _rank_and_size_after_init():
    import tfring

    tfring.init()
    return tfring.rank(), tfring.size()


def test_elastic_job_returns_results_by_final_rank():
    assert tfring.run(_rank_and_size_after_init, np=2, min_np=1, max_np=2) == [(0, 2), (1, 2)]


def test_a_thread_other_than_main_is_refused():
    errors = []

    def call():
        try:
            tfring.run(_rank_times, args=(1,), np=2)
        except RuntimeError as e:
            errors.append(str(e))

    t = threading.Thread(target=call)
    t.start()
    t.join(30)
    assert errors and "main thread" in errors[0]
