"""Elastic jobs end to end (issue 18): tfringrun --min-np/--max-np with 2-3 real workers,
each test bounded in time. Hosts are loopback addresses (127.0.0.x: started here, but
separate hosts to tfring: own cross rank, TCP between them), given with -H or by a
discovery script the test rewrites.

What each test pins: the survivors of a SIGKILLed worker (rank 1, or rank 0) restore the
last commit, re-form without it and finish every epoch with equal weights, and the
launcher names the lost rank and the new size; a discovery script's new host joins at the
next commit and starts from the synced weights; a host whose worker keeps crashing is
blacklisted while the job goes on; too few workers end the job with a clear error after
--elastic-timeout; a custom loop with TensorFlowKerasState does the same as fit.
"""

import glob
import json
import os
import re
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

from tests.helpers import (
    LAUNCHER,
    REPO_ROOT,
    format_job_output,
    job_env,
    rank_output,
    rank_python,
    run_launcher,
)

pytestmark = pytest.mark.multiprocess

WORKER = os.path.join(REPO_ROOT, "tests", "workers", "elastic_train.py")
THREE_HOSTS = "127.0.0.1:1,127.0.0.2:1,127.0.0.3:1"
FAST = ("--discovery-interval-s", "0.2",)


def _script():
    with open(WORKER) as f:
        return f.read()


def _run(launcher_args, cfg, tmp_path, timeout=150, check=True):
    return run_launcher([*launcher_args, *FAST], _script(), timeout=timeout, check=check,
                        script_args=(json.dumps(cfg), str(tmp_path)))


def _discovery(tmp_path, hosts):
    """A hosts file holding ``hosts`` and a discovery script printing it: (file, script)."""
    hosts_file = tmp_path / "hosts.txt"
    hosts_file.write_text(hosts)
    script = tmp_path / "discover.sh"
    script.write_text(f"#!/bin/sh\ncat {hosts_file}\n")
    script.chmod(0o755)
    return hosts_file, script


def _finals(result):
    """{worker: (rank, size, epoch, iterations)} from the FINAL lines."""
    out = {}
    for m in re.finditer(r"FINAL worker=(w\d+) rank=(\d+) size=(\d+) epoch=(\d+) iterations=(\d+)", result.stdout):
        out[m.group(1)] = tuple(int(v) for v in m.groups()[1:])
    return out


def _weights(tmp_path):
    return {os.path.basename(p)[len("final_"):-len(".npy")]: np.load(p)
            for p in glob.glob(os.path.join(tmp_path, "final_*.npy"))}


def _assert_equal_weights(tmp_path, workers, report):
    weights = _weights(tmp_path)
    assert sorted(weights) == sorted(workers), report
    first = weights[workers[0]]
    for w in workers[1:]:
        np.testing.assert_array_equal(weights[w], first, err_msg=f"{w} vs {workers[0]}\n{report}")


# Rank 0 is the harder case (the new rank 0 must be a survivor holding the commit); the
# frozen-worker test below loses rank 1, the custom-loop test rank 2.
@pytest.mark.parametrize("victim", ["w0"], ids=["rank0"])
def test_sigkill_mid_fit_survivors_restore_and_finish(tmp_path, victim):
    cfg = {"mode": "fit", "epochs": 4, "commit_every": 1, "sleep_s": 0.02,
           "die_worker": victim, "die_epoch": 1, "die_batch": 3}
    result = _run(["-np", "3", "--min-np", "2", "-H", THREE_HOSTS], cfg, tmp_path)
    report = format_job_output(result.stdout, result.stderr)
    lost_rank = int(victim[1:])
    lost_host = f"127.0.0.{lost_rank + 1}"
    assert f"lost worker {victim} (rank {lost_rank} of 3 in generation 1, host {lost_host}" in result.stderr, report
    assert "killed by signal 9 (SIGKILL)" in result.stderr, report
    assert f"generation 2: 2 worker(s) (lost rank {lost_rank} on host {lost_host})" in result.stderr, report
    survivors = [w for w in ("w0", "w1", "w2") if w != victim]
    finals = _finals(result)
    assert sorted(finals) == survivors, report
    # Every survivor finished all 4 epochs at world size 2. The commit after batch 3 of epoch
    # 1 (12 steps) is where they went on from; fit then ran epoch 1 again in full: 12 + 3 * 8.
    assert {f[1:] for f in finals.values()} == {(2, 4, 36)}, report
    assert sorted(f[0] for f in finals.values()) == [0, 1], report
    for w in survivors:
        assert "restoring the last commit" in rank_output(result.stdout + result.stderr, w), report
    _assert_equal_weights(tmp_path, survivors, report)


def test_a_frozen_worker_is_killed_after_the_peer_timeout_and_the_job_goes_on(tmp_path):
    cfg = {"mode": "fit", "epochs": 3, "commit_every": 1, "sleep_s": 0.02, "freeze": True,
           "die_worker": "w1", "die_epoch": 1, "die_batch": 3}
    result = _run(["-np", "3", "--min-np", "2", "-H", THREE_HOSTS, "--peer-timeout-s", "3"], cfg, tmp_path)
    report = format_job_output(result.stdout, result.stderr)
    assert re.search(r"worker w1 \(rank 1 of 3 in generation 1, host 127\.0\.0\.2, pid \d+\) has been stopped by "
                     r"SIGSTOP for [\d.]+ s; killing it", result.stderr), report
    # The driver kills w1 after 3 s stopped and the survivors find it silent after 3 s
    # (the same peer timeout): either event may re-form the job first, so the generation's
    # reason is one of the two; the loss and the blacklisting are reported either way.
    assert re.search(r"generation 2: 2 worker\(s\) \((lost rank 1 on host 127\.0\.0\.2|a worker found generation 1 "
                     r"broken)\); ranks 0=w0@127\.0\.0\.1, 1=w2@127\.0\.0\.3", result.stderr), report
    assert re.search(r"lost worker w1 \(rank 1 of 3 in generation 1, host 127\.0\.0\.2, pid \d+\): it was killed by "
                     r"signal 9 \(SIGKILL\); host 127\.0\.0\.2 blacklisted", result.stderr), report
    finals = _finals(result)
    assert sorted(finals) == ["w0", "w2"], report
    assert {f[1:] for f in finals.values()} == {(2, 3, 28)}, report  # 12 + epochs 1 and 2 in full
    _assert_equal_weights(tmp_path, ["w0", "w2"], report)


def test_discovery_adds_a_host_and_the_new_worker_starts_from_synced_state(tmp_path):
    hosts_file, script = _discovery(tmp_path, "127.0.0.1\n127.0.0.2\n")
    # Generation 1 runs slowly (0.25 s per batch, 80 batches at most) until the new worker,
    # which imports TF first, is ready and joins at the next commit.
    cfg = {"mode": "fit", "epochs": 10, "commit_every": 1, "slow_until_generation": 2, "slow_s": 0.25,
           "grow_file": str(hosts_file), "grow_host": "127.0.0.3", "grow_epoch": 0}
    result = _run(["--min-np", "2", "--max-np", "3", "--host-discovery-script", str(script)], cfg, tmp_path)
    report = format_job_output(result.stdout, result.stderr)
    assert "generation 1: 2 worker(s)" in result.stderr, report
    assert "generation 2: 3 worker(s) (worker w2 on host 127.0.0.3 is ready)" in result.stderr, report
    finals = _finals(result)
    assert sorted(finals) == ["w0", "w1", "w2"], report
    assert {f[1:3] for f in finals.values()} == {(3, 10)}, report
    assert "re-forming the job at this commit" in rank_output(result.stderr, "w0"), report
    _assert_equal_weights(tmp_path, ["w0", "w1", "w2"], report)


def test_a_host_the_discovery_script_drops_leaves_at_the_next_commit_without_loss(tmp_path):
    hosts_file, script = _discovery(tmp_path, "127.0.0.1\n127.0.0.2\n127.0.0.3\n")
    cfg = {"mode": "fit", "epochs": 4, "commit_every": 1, "slow_until_generation": 2, "slow_s": 0.2,
           "shrink_file": str(hosts_file), "shrink_host": "127.0.0.2"}
    result = _run(["--min-np", "2", "--max-np", "3", "--host-discovery-script", str(script)], cfg, tmp_path)
    report = format_job_output(result.stdout, result.stderr)
    assert "worker w1 (rank 1 of 3 in generation 1, host 127.0.0.2" in result.stderr, report
    assert "leaves at the job's next commit" in result.stderr, report
    assert "generation 2: 2 worker(s) (host 127.0.0.2 removed)" in result.stderr, report
    assert "is not part of generation 2" in rank_output(result.stderr, "w1"), report
    for w in ("w0", "w2"):  # no member was lost: they re-formed at a commit, nothing restored
        out = rank_output(result.stderr, w)
        assert "re-forming the job at this commit" in out and "restoring" not in out, report
    finals = _finals(result)
    assert sorted(finals) == ["w0", "w2"], report
    assert len({f[1:] for f in finals.values()}) == 1 and finals["w0"][1:3] == (2, 4), report
    assert "has not left; stopping it" not in result.stderr, report
    _assert_equal_weights(tmp_path, ["w0", "w2"], report)


def test_a_host_whose_worker_keeps_crashing_is_blacklisted_and_the_job_goes_on(tmp_path):
    cfg = {"mode": "fit", "epochs": 4, "commit_every": 4, "sleep_s": 0.15, "crash_hosts": ["127.0.0.3"]}
    result = _run(["--min-np", "2", "--max-np", "3", "-H", THREE_HOSTS, "--blacklist-cooldown-range", "0.5", "1"],
                  cfg, tmp_path)
    report = format_job_output(result.stdout, result.stderr)
    blacklisted = re.findall(r"host 127\.0\.0\.3 blacklisted for ([\d.]+) s", result.stderr)
    assert len(blacklisted) >= 2, report  # it came back after its cooldown and crashed again
    assert blacklisted[:2] == ["0.5", "1"], report  # the cooldown doubles, capped at MAX
    finals = _finals(result)
    assert sorted(finals) == ["w0", "w1"], report
    assert {f[1:] for f in finals.values()} == {(2, 4, 32)}, report  # never interrupted


@pytest.mark.parametrize("cooldown", [False, True], ids=["hopeless", "timeout"])
def test_below_min_np_the_job_ends_with_a_clear_error(tmp_path, cooldown):
    """Host 127.0.0.3's worker crashes, so 2 < --min-np 3 can run. Blacklisted for good on a
    fixed host list, no third worker can ever come: the job ends at once. With a cooldown
    the host may come back, so the driver waits --elastic-timeout first. Either way the
    waiting workers are told why through the store (JobEndedError) and tfringrun exits 1."""
    cfg = {"mode": "fit", "epochs": 2, "commit_every": 1, "crash_hosts": ["127.0.0.3"]}
    extra = ["--blacklist-cooldown-range", "100", "100"] if cooldown else []
    result = _run(["--min-np", "3", "-H", THREE_HOSTS, "--elastic-timeout", "3", *extra], cfg, tmp_path,
                  check=False)
    report = format_job_output(result.stdout, result.stderr)
    assert result.returncode == 1, report
    if cooldown:
        assert "2 worker(s) ready, below --min-np 3; waiting up to 3 s" in result.stderr, report
        reason = "only 2 worker(s) could run for 3 s (--elastic-timeout), below --min-np 3"
    else:
        reason = "2 worker(s) can ever run on the hosts left"
    assert f"ending the elastic job: {reason}" in result.stderr, report
    for w in ("w0", "w1"):
        out = rank_output(result.stdout + result.stderr, w)
        assert f"JobEndedError: the elastic driver ended the job: {reason}" in out and "FINAL" not in out, report


def test_custom_loop_with_tensorflow_keras_state_survives_a_lost_worker(tmp_path):
    cfg = {"mode": "loop", "epochs": 3, "batches": 6, "commit_every": 2, "sleep_s": 0.02,
           "die_worker": "w2", "die_epoch": 1, "die_batch": 3}
    result = _run(["-np", "3", "--min-np", "2", "-H", THREE_HOSTS], cfg, tmp_path)
    report = format_job_output(result.stdout, result.stderr)
    assert "generation 2: 2 worker(s) (lost rank 2 on host 127.0.0.3)" in result.stderr, report
    finals = _finals(result)
    assert sorted(finals) == ["w0", "w1"], report
    # The loop leaves state.epoch at the last epoch (2). Commits after batches 0, 2, 4: the
    # survivors went on from the one after batch 2 of epoch 1 (9 steps) and ran batches 2-5
    # of epoch 1 and all 6 of epoch 2: 9 + 4 + 6.
    assert {f[1:] for f in finals.values()} == {(2, 2, 19)}, report
    _assert_equal_weights(tmp_path, ["w0", "w1"], report)


def test_elastic_flags_are_checked_before_anything_starts():
    from tfring._runner import args

    for argv, message in ((["--min-np", "3", "--max-np", "2", "python", "x.py"], "--max-np 2 is below --min-np 3"),
                          (["-np", "1", "--min-np", "2", "python", "x.py"], "-np 1 must lie between"),
                          (["--min-np", "2", "--host-discovery-script", "d.sh", "-H", "a:1", "python", "x.py"],
                           "not both"),
                          (["--max-np", "2", "--blacklist-cooldown-range", "5", "1", "python", "x.py"],
                           "0 < MIN <= MAX")):
        with pytest.raises(args.UsageError, match=re.escape(message)):
            args.parse(argv)
    ns = args.parse(["-np", "2", "python", "x.py"])
    assert not args.is_elastic(ns)


def test_the_example_goes_on_when_a_worker_is_killed_mid_training():
    """examples/keras_elastic.py as a user runs it; the test SIGKILLs worker w1 from outside
    once rank 0 has started epoch 3."""
    example = os.path.join(REPO_ROOT, "examples", "keras_elastic.py")
    # Fork-server ranks (tests/fork_server.py): the pid the launcher reports is the rank's
    # stand-in, whose SIGKILL the server turns into its rank's at once; fresh ranks added
    # ~18 CPU-s of imports and proved nothing more about the example.
    cmd = [*LAUNCHER, "-np", "3", "--min-np", "2", "-H", THREE_HOSTS, "-v", *rank_python(fork=True), example,
           "--epochs", "30"]
    proc = subprocess.Popen(cmd, env=job_env(), cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)  # one line at a time
    reader.start()
    deadline = time.monotonic() + 240
    killed = None
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            text = "".join(lines)
            if killed is None and "[w0]<stdout>: Epoch 3/30" in text:
                killed = int(re.search(r"worker w1 \(.*pid (\d+)\) started", text).group(1))
                os.kill(killed, signal.SIGKILL)
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        reader.join(10)
    output = "".join(lines)
    assert killed is not None, output
    assert proc.returncode == 0, output
    assert "generation 2: 2 worker(s) (lost rank 1 on host 127.0.0.2)" in output, output
    accuracy = float(re.search(r"Test accuracy: ([\d.]+) \(world size 2 at the end\)", output).group(1))
    assert accuracy > 0.9, output
    assert "reset: rank 1 of 2, learning rate 0.002" in output, output  # the reset callback scaled it


PROCESS_SET_SCRIPT = """
import os, signal
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
import tfring.tensorflow as hvd

hvd.init()
worker = os.environ["TFRING_ELASTIC_WORKER"]
sets = {}


def make_sets():
    # A proper subset at every size: [0, 1] would be every rank once rank 2 is lost, a
    # duplicate of the global set, which add_process_set refuses (as Horovod).
    sets["one"] = hvd.add_process_set([1])
    print(f"SETS worker={worker} rank={hvd.rank()} size={hvd.size()} id={sets['one'].process_set_id}", flush=True)


make_sets()
state = hvd.elastic.ObjectState(step=0)
state.register_reset_callbacks([make_sets])


@hvd.elastic.run
def train(state):
    while state.step < 12:
        if hvd.rank() == 1:
            one = hvd.allreduce(tf.ones(1) * 3, op=hvd.Sum, process_set=sets["one"]).numpy()[0]
            assert one == 3.0, one
        total = hvd.allreduce(tf.ones(1), op=hvd.Sum).numpy()[0]
        state.step += 1
        state.commit()
        if worker == "w2" and state.step == 5:
            os.kill(os.getpid(), signal.SIGKILL)
    return total


total = train(state)
print(f"DONE worker={worker} rank={hvd.rank()} size={hvd.size()} total={total} step={state.step}", flush=True)
"""


def test_process_sets_are_added_again_in_a_reset_callback():
    """docs/elastic.md's recipe: sets do not survive a reset; a reset callback adds them
    again (a collective every rank makes there) and collectives on them go on."""
    result = run_launcher(["-np", "3", "--min-np", "2", "-H", THREE_HOSTS, *FAST], PROCESS_SET_SCRIPT, timeout=150)
    report = format_job_output(result.stdout, result.stderr)
    assert "generation 2: 2 worker(s) (lost rank 2 on host 127.0.0.3)" in result.stderr, report
    for w in ("w0", "w1"):
        out = rank_output(result.stdout, w)
        assert f"SETS worker={w} rank={w[1]} size=2 id=1" in out, report
        assert f"DONE worker={w} rank={w[1]} size=2 total=2.0 step=12" in out, report


def test_a_script_failing_before_init_ends_the_job_at_once_with_its_traceback(tmp_path):
    """Issue 28: an import error on every worker, hosts from a discovery script. The driver
    used to blacklist each host and wait the whole --elastic-timeout (120 s here, past this
    test's limit); now no generation formed and every worker failed alike before init(), so
    tfringrun ends at once with their exit code and the traceback."""
    _, script = _discovery(tmp_path, "127.0.0.1\n127.0.0.2\n")
    started = time.monotonic()
    result = run_launcher(["--min-np", "2", "--host-discovery-script", str(script), "--elastic-timeout", "120", *FAST],
                          "import os\nimport tfring_no_such_module\n", timeout=60, check=False)
    took = time.monotonic() - started
    report = format_job_output(result.stdout, result.stderr)
    assert result.returncode == 1, report
    assert took < 30, report
    launcher = [line for line in result.stderr.splitlines() if line.startswith("tfringrun: ")]
    assert any("ending the elastic job: every worker started so far (w0 on 127.0.0.1, w1 on 127.0.0.2) exited with "
               "code 1 before calling init()" in line for line in launcher), report
    assert "tfringrun:   ModuleNotFoundError: No module named 'tfring_no_such_module'" in launcher, report
    assert "waiting up to" not in result.stderr, report


LATE_JOINER_SCRIPT = """
import os, sys, time
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
import tfring.tensorflow as hvd
from tfring._elastic import worker as elastic_worker

hvd.init()
worker = os.environ["TFRING_ELASTIC_WORKER"]
state = hvd.elastic.ObjectState(steps=0)


@hvd.elastic.run
def train(state):
    if hvd.rank() == 0:
        with open(sys.argv[1], "a") as f:
            f.write("127.0.0.3\\n")  # a third host: its worker starts, imports TF and becomes ready
    # Train until the driver has published generation 2 with that worker, then end without
    # another commit: generation 2 never forms, its new member is still in its rendezvous.
    for _ in range(1200):
        newest = hvd.broadcast_object(elastic_worker.current_generation() if hvd.rank() == 0 else None)
        hvd.allreduce(tf.ones(1))
        state.steps += 1
        if newest >= 2:
            return newest
        time.sleep(0.05)
    raise RuntimeError("generation 2 was never published")


newest = train(state)
print(f"DONE worker={worker} rank={hvd.rank()} size={hvd.size()} newest={newest}", flush=True)
"""


def test_a_worker_joining_as_the_others_finish_leaves_and_the_job_succeeds(tmp_path):
    """Issue 28: the others finish training while the new worker is in the rendezvous of a
    generation they never join. It used to wait there TFRING_START_TIMEOUT_S (30 s), then
    raise JobEndedError, and tfringrun exited 1; a finished job is a success."""
    hosts_file, script = _discovery(tmp_path, "127.0.0.1\n127.0.0.2\n")
    result = run_launcher(["--min-np", "2", "--max-np", "3", "--host-discovery-script", str(script), *FAST],
                          LATE_JOINER_SCRIPT, timeout=150, check=False, script_args=(str(hosts_file),))
    report = format_job_output(result.stdout, result.stderr)
    assert result.returncode == 0, report
    for w in ("w0", "w1"):
        assert f"DONE worker={w} rank={w[1]} size=2 newest=2" in rank_output(result.stdout, w), report
    assert re.search(r"tfringrun: worker w2 \(rank 2 of 3 in generation 2, host 127\.0\.0\.3, pid \d+\) had not joined "
                     r"the job when it finished; it leaves without training", result.stderr), report
    assert "JobEndedError" not in result.stderr and "Traceback" not in result.stderr, report
