"""One live progress bar per job (issue 19): tfringrun forwards rank 0's carriage-return
redraws as they are written, each with its rank prefix, so Keras' bar moves within an
epoch; the other ranks' bars are silenced inside fit (TFRING_PROGRESS_ALL_RANKS=1 opts
out). The launcher's console is a pseudo-terminal here, as a user's would be."""

import os
import pty
import re
import select
import subprocess
import time

import pytest

from tests.helpers import LAUNCHER, REPO_ROOT, job_env, rank_output, rank_python, run_job
from tfring._runner.output import _split_pieces

FIT = """
import time, numpy as np, tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
import keras, tfring.keras as hvd
hvd.init()
class Slow(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        time.sleep(0.1)  # Keras redraws at most every 0.05 s: give every batch its redraw
x = np.random.default_rng(hvd.rank()).standard_normal((320, 4)).astype("float32")
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.01)), loss="mse")
model.fit(x, x.sum(1), batch_size=32, epochs=1, callbacks=[Slow()])   # verbose="auto"
print("DONE", hvd.rank(), flush=True)
"""


def _plain(data):
    """Terminal bytes as text without colour codes."""
    return re.sub(r"\x1b\[[0-9;]*m", "", data.decode("utf-8", "replace"))


def _run_on_a_terminal(script, env, timeout):
    """Runs tfringrun -np 2 with its stdout and stderr on a pty; returns (chunks, exit code),
    chunks being (time, bytes) as the terminal received them."""
    path = os.path.join(REPO_ROOT, "build", "progress_job.py")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(script)
    main, sub = pty.openpty()
    # Fork-server ranks (rank_python): the launcher's pipes and pty are passed to the rank
    # as its own stdio, so Keras and tfring see what a fresh rank sees.
    proc = subprocess.Popen([*LAUNCHER, "-np", "2", *rank_python(script), path], env=job_env(env), cwd=REPO_ROOT,
                            stdin=subprocess.DEVNULL, stdout=sub, stderr=sub, start_new_session=True)
    os.close(sub)
    chunks, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 0.5)
            if ready:
                try:
                    data = os.read(main, 65536)
                except OSError:  # EIO: every writer has closed the terminal
                    break
                if not data:
                    break
                chunks.append((time.monotonic(), data))
            elif proc.poll() is not None:
                break
        else:
            raise AssertionError(f"the job did not end within {timeout} s")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
        code = proc.wait(timeout=10)
        os.close(main)
    return chunks, code


@pytest.mark.multiprocess
@pytest.mark.timeout(120)
def test_rank_0_progress_bar_moves_within_an_epoch_and_rank_1_is_silent():
    chunks, code = _run_on_a_terminal(FIT, {}, 90)
    text = _plain(b"".join(c for _, c in chunks))
    assert code == 0, text
    # rank 0's redraws: "[0]<stdout>:  3/10 ━━━..." pieces, each ending in \r, seen as they came
    steps = [int(m.group(1)) for m in re.finditer(r"\[0\]<stdout>: +(\d+)/10 ", text)]
    assert len(set(steps)) >= 3 and steps == sorted(steps), text
    # they reached the terminal at different moments, not in one burst at the end
    times = [t for t, c in chunks if re.search(r"\[0\]<stdout>: +\d+/10 ", _plain(c))]
    assert len(times) >= 3 and times[-1] - times[0] > 0.3, text
    assert not re.search(r"\[1\]<stdout>: +\d+/10 ", text), text  # rank 1 draws no bar
    assert "[1]<stdout>: DONE 1" in text and "[0]<stdout>: DONE 0" in text


@pytest.mark.multiprocess
@pytest.mark.timeout(120)
def test_every_rank_draws_its_bar_when_asked():
    chunks, code = _run_on_a_terminal(FIT, {"TFRING_PROGRESS_ALL_RANKS": "1"}, 90)
    text = _plain(b"".join(c for _, c in chunks))
    assert code == 0 and re.search(r"\[1\]<stdout>: +\d+/10 ", text), text


def test_pieces_end_at_newlines_and_carriage_returns():
    assert _split_pieces("a\nb\rc") == (["a\n", "b\r"], "c")
    assert _split_pieces("a\r\nb\r") == (["a\r\n"], "b\r")  # a final \r may begin \r\n
    assert _split_pieces("\r 1/2 [==]\b\b\r 2/2\n") == (["\r", " 1/2 [==]\b\b\r", " 2/2\n"], "")
    pieces, rest = _split_pieces("x" * 70000)
    assert [len(p) for p in pieces] == [70000] and rest == ""


EPOCH_LINES_AND_EVALUATE = """
import numpy as np, tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
import keras, tfring.keras as hvd
hvd.init()
x = np.random.default_rng(hvd.rank()).standard_normal((64, 4)).astype("float32")
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.01)), loss="mse")
model.fit(x, x.sum(1), batch_size=32, epochs=2, verbose=2)   # one line per epoch
model.evaluate(x, x.sum(1), batch_size=32)                   # verbose="auto": a bar
model.predict(x, batch_size=32, verbose=1)
print("DONE", hvd.rank(), flush=True)
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(120)
def test_epoch_lines_and_evaluate_and_predict_bars_come_from_rank_0_only():
    """Issue 40: fit(verbose=2)'s epoch lines and evaluate()'s bar printed on every rank."""
    result = run_job(2, EPOCH_LINES_AND_EVALUATE, timeout=90)
    rank0, rank1 = (rank_output(result.stdout, r, "stdout") for r in (0, 1))
    assert "Epoch 2/2" in rank0 and re.search(r"2/2 .*loss", rank0), rank0
    assert rank0.count("step") >= 4, rank0  # 2 epoch lines, evaluate's and predict's bars
    assert rank1.strip() == "DONE 1", rank1
