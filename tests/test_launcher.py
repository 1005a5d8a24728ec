"""tfringrun: command line, slot plan, and real jobs of 2-3 plain-Python workers (NumPy
collectives, no TensorFlow): environment, output, failures, signals, secret hygiene."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.helpers import LAUNCHER, REPO_ROOT, format_job_output, job_env, rank_output, run_job
from tfring._runner import args as args_lib
from tfring._runner import hosts, jobenv, settings
from tfring._runner.blame import Blame
from tfring._runner.supervisor import Failure

# ---------------------------------------------------------------- no processes


def test_plan_assigns_local_and_cross_ranks_host_by_host():
    plan = hosts.plan(hosts.parse_hosts("localhost:2,127.0.0.1:3"), 4)
    assert [(s.host, s.rank, s.local_rank, s.local_size, s.cross_rank, s.cross_size) for s in plan] == [
        ("localhost", 0, 0, 2, 0, 2), ("localhost", 1, 1, 2, 0, 2),
        ("127.0.0.1", 2, 0, 2, 1, 2), ("127.0.0.1", 3, 1, 2, 1, 2)]
    one = hosts.plan(hosts.parse_hosts("a:2,b:2"), 2)  # unused hosts do not count
    assert {s.cross_size for s in one} == {1}
    assert len(hosts.plan(hosts.parse_hosts("a:2,b"))) == 3  # -np defaults to every slot
    assert hosts.plan(None, 3)[2].env() == {
        "TFRING_RANK": "2", "TFRING_SIZE": "3", "TFRING_LOCAL_RANK": "2", "TFRING_LOCAL_SIZE": "3",
        "TFRING_CROSS_RANK": "0", "TFRING_CROSS_SIZE": "1"}


def test_hostfile(tmp_path):
    path = tmp_path / "hosts"
    path.write_text("# cluster\nlocalhost slots=2\n\n127.0.0.1   slots=1  # spare\n")
    assert hosts.parse_hostfile(str(path)) == [hosts.Host("localhost", 2), hosts.Host("127.0.0.1", 1)]
    path.write_text("localhost cores=2\n")
    with pytest.raises(ValueError, match="line 1"):
        hosts.parse_hostfile(str(path))


@pytest.mark.parametrize("text,np_,message", [
    ("a:2,b:1", 4, "needs 4 slots but the hosts have 3"),
    ("a:2,a:1", None, "listed twice"),
    ("a:0", None, "positive integer"),
    ("a:x", None, "positive integer"),
    ("", None, "no hosts"),
])
def test_bad_hosts_are_refused(text, np_, message):
    with pytest.raises(ValueError, match=message):
        hosts.plan(hosts.parse_hosts(text), np_)


def test_local_host_detection():
    import socket

    assert hosts.is_local("localhost") and hosts.is_local("127.0.0.1") and hosts.is_local("[::1]")
    assert hosts.is_local(socket.gethostname())
    assert not hosts.is_local("node-17.example.invalid")


def test_command_line_keeps_the_worker_command_untouched():
    ns = args_lib.parse(["-np", "2", "--cycle-time-ms", "3", "python", "train.py", "-np", "5", "--verbose"])
    assert ns.num_proc == 2 and ns.cycle_time_ms == "3" and not ns.verbose
    assert ns.command == ["python", "train.py", "-np", "5", "--verbose"]
    assert args_lib.parse(["-np", "2", "--", "python", "-v"]).command == ["python", "-v"]
    for bad in (["-np", "2"], ["python", "x.py"], ["-np", "2", "--grace-period-s", "-1", "python"]):
        with pytest.raises(args_lib.UsageError):
            args_lib.parse(bad)


def test_workers_get_the_users_malloc_settings_untouched():
    """tfringrun once added glibc.malloc.hugetlb=1 to every worker's GLIBC_TUNABLES; on
    this VM it made the mean large call 2x slower (docs/benchmarks.md), so the variable
    passes through as the user set it, or stays unset."""
    slot = hosts.plan(None, 1)[0]
    assert "GLIBC_TUNABLES" not in jobenv.worker_env({"PATH": "/bin"}, slot, {}, "127.0.0.1:5", "s" * 64)
    env = jobenv.worker_env({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"}, slot, {}, "127.0.0.1:5", "s" * 64)
    assert env["GLIBC_TUNABLES"] == "glibc.malloc.arena_max=2"
    from tfring._elastic import launch as elastic_launch

    class Store:
        def env(self):
            return {"TFRING_STORE_ADDR": "127.0.0.1:5"}

    assert "GLIBC_TUNABLES" not in elastic_launch._worker_env({"PATH": "/bin"}, {}, Store(), "w0", "localhost", 5.0)


def test_options_from_python_are_the_command_lines_namespace():
    """tfring.run's way in (args.options): the namespace tfringrun's command line gives,
    the same conversions and the same refusals, without a command line."""
    command = ["python", "x.py", "-np", "5"]
    static = args_lib.options(command, num_proc=2, hosts=None, start_timeout=30, verbose=True, ssh_port="22")
    assert vars(static) == vars(args_lib.parse(["-np", "2", "--start-timeout", "30", "-v", "--ssh-port", "22",
                                                "--", *command]))
    elastic = args_lib.options(command, min_np=1, max_np=3, blacklist_cooldown_range=(1, 2), slots=2)
    assert vars(elastic) == vars(args_lib.parse(["--min-np", "1", "--max-np", "3", "--blacklist-cooldown-range",
                                                 "1", "2", "--slots", "2", *command]))
    with pytest.raises(args_lib.UsageError, match="--max-np 2 is below --min-np 3"):
        args_lib.options(command, min_np=3, max_np=2)
    with pytest.raises(args_lib.UsageError, match="argument -np/--num-proc: invalid value: 'two'"):
        args_lib.options(command, num_proc="two")
    with pytest.raises(args_lib.UsageError, match="give the number of processes"):
        args_lib.options(command)
    with pytest.raises(TypeError, match="no launcher option 'nproc'"):
        args_lib.options(command, nproc=2)


def test_one_supervision_loop_and_one_store_block_serve_both_launchers():
    """tfringrun's static job (supervisor.Job) and its elastic one (ElasticJob) run the same
    loop (supervision_loop.supervise) and serve their store through the same block
    (store_hook.serving): no other launcher module takes the relay's signals, waits on an
    exit queue or stops a launch's store. Reads the sources (calls, not comments)."""
    import ast

    callers = {}
    for folder in ("_runner", "_elastic"):
        for name in sorted(os.listdir(os.path.join(REPO_ROOT, "tfring", folder))):
            if name.endswith(".py"):
                with open(os.path.join(REPO_ROOT, "tfring", folder, name), encoding="utf-8") as f:
                    tree = ast.parse(f.read())
                for node in ast.walk(tree):
                    if isinstance(node, ast.Call):
                        callers.setdefault(ast.unparse(node.func), set()).add(f"{folder}/{name}")
    assert callers["relay.take"] == {"_runner/supervision_loop.py"}
    assert callers["queue.Queue"] == {"_runner/supervision_loop.py"}
    assert callers["store.stop"] == {"_runner/store_hook.py"}
    assert callers["supervise"] == {"_elastic/driver.py", "_runner/supervisor.py"}
    assert callers["store_hook_lib.serving"] == {"_elastic/launch.py", "_runner/launch.py"}


def test_setting_flags_come_from_the_core_table():
    table = settings.table()
    text = args_lib.build_parser().format_help()
    for flag in settings.FLAGS:
        assert flag.flag in text
        assert flag.variable in text.replace("\n", " ").replace("  ", " ") or flag.variable not in table
    ns = args_lib.parse(["-np", "1", "--fusion-threshold-mb", "1.5", "--log-level", "info", "python"])
    collected = settings.collect(ns, {"TFRING_CYCLE_TIME_MS": "2", "TFRING_RANK": "7", "OTHER": "x"})
    assert collected["TFRING_FUSION_THRESHOLD"] == (str(3 << 19), "--fusion-threshold-mb 1.5")
    assert collected["TFRING_CYCLE_TIME_MS"][0] == "2"
    assert "TFRING_RANK" not in collected  # identity is the launcher's to set
    with pytest.raises(ValueError, match="--cycle-time-ms -1.*TFRING_CYCLE_TIME_MS"):
        settings.validate(settings.collect(args_lib.parse(["-np", "1", "--cycle-time-ms", "-1", "p"]), {}),
                          hosts.plan(None, 1)[0].env())


def test_every_option_is_documented():
    with open(os.path.join(REPO_ROOT, "docs", "launcher.md")) as f:
        doc = f.read()
    for action in args_lib.build_parser()._actions:
        for option in action.option_strings:
            if option not in ("-h", "--help"):
                assert f"`{option}" in doc, f"{option} is missing from docs/launcher.md"


def test_oversubscription_warning_and_the_log_level_that_hides_it():
    from tfring._runner import binding

    assert binding.oversubscription_warning(2, 2) is None and binding.oversubscription_warning(1, 4) is None
    text = binding.oversubscription_warning(4, 2)
    assert text.startswith("warning: 4 ranks on this host, which has 2 CPUs") and "share cores" in text
    assert "-np 2" in text and "tfring.run(np=2)" in text and "TFRING_LOG_LEVEL=warning,cpu=error" in text
    for spec, shown in [(None, True), ("warning", True), ("info,transport=debug", True), ("ERROR", False),
                        ("warning,cpu=error", False), ("warning,cpu=FATAL", False), ("error,cpu=warning", True),
                        ("error,cpu=debug", True)]:
        job = {} if spec is None else {"TFRING_LOG_LEVEL": (spec, "environment variable TFRING_LOG_LEVEL")}
        assert settings.log_enabled(job, "warning", "cpu") is shown, spec


def test_tracebacks_keep_each_ranks_last_uncaught_error():
    from tfring._runner.tracebacks import Tracebacks

    seen = Tracebacks()
    for line in ["Traceback (most recent call last):\n", '  File "x.py", line 1, in <module>\n',
                 "KeyError: 'a'\n", "\n", "During handling of the above exception, another exception occurred:\n",
                 "\n", "Traceback (most recent call last):\n", "    raise ValueError(x)\n", "ValueError: boom\n",
                 "ValueError: printed later, not in a traceback\n"]:
        seen.observe(0, line)
    assert seen.last(0) == "ValueError: boom" and seen.last(1) is None
    assert seen.last(0, before=0.0) is None  # seen after that time


def test_blame_skips_ranks_that_failed_because_of_a_lost_peer():
    blame = Blame()
    blame.observe(2, "tfring.errors.PreconditionError: tfring rank 2: rank 1 has shut down (it ...)")
    blame.observe(0, "[tfring ERROR vm:rank 0:pid 9] runtime: tfring rank 0: rank 1 is gone: ...")
    failures = [Failure(2, 12, 1), Failure(0, 10, 1), Failure(1, 11, 3)]
    assert blame.root_cause(failures).rank == 1
    assert blame.root_cause(failures[:2]).rank == 2  # the lost rank did not fail: exit order
    assert Blame().root_cause(failures).rank == 2


# ---------------------------------------------------------------- real jobs

ENV_SCRIPT = """
import hashlib, json, os, tfring
tfring.init()
ids = {k: os.environ[k] for k in ("TFRING_RANK", "TFRING_SIZE", "TFRING_LOCAL_RANK", "TFRING_LOCAL_SIZE",
                                  "TFRING_CROSS_RANK", "TFRING_CROSS_SIZE", "TFRING_STORE_ADDR")}
ids["api"] = [tfring.rank(), tfring.size(), tfring.local_rank(), tfring.local_size(),
              tfring.cross_rank(), tfring.cross_size()]
ids["secret_sha"] = hashlib.sha256(os.environ["TFRING_SECRET"].encode()).hexdigest()
ids["secret_len"] = len(os.environ["TFRING_SECRET"])
print("IDS " + json.dumps(ids), flush=True)
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(90)
@pytest.mark.parametrize("np_", [2, 3])
def test_every_rank_gets_its_identity_and_the_store(np_):
    result = run_job(np_, ENV_SCRIPT, timeout=60)
    seen = {}
    for r in range(np_):
        line = next(li for li in rank_output(result.stdout, r).splitlines() if li.startswith("IDS "))
        seen[r] = json.loads(line[4:])
    for r, ids in seen.items():
        assert ids["api"] == [r, np_, r, np_, 0, 1]
        assert (ids["TFRING_RANK"], ids["TFRING_SIZE"], ids["TFRING_LOCAL_RANK"]) == (str(r), str(np_), str(r))
        assert (ids["TFRING_CROSS_RANK"], ids["TFRING_CROSS_SIZE"]) == ("0", "1")
        assert ids["TFRING_STORE_ADDR"].startswith("127.0.0.1:")  # single host: loopback only
        assert ids["secret_len"] == 64
    assert len({ids["secret_sha"] for ids in seen.values()}) == 1
    assert len({ids["TFRING_STORE_ADDR"] for ids in seen.values()}) == 1


OUTPUT_SCRIPT = """
import os, sys
r = os.environ["TFRING_RANK"]
print("hello from", r)
print("trouble on", r, file=sys.stderr)
sys.stdout.write("no newline at the end " + r)
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_output_lines_carry_the_rank_and_stream(tmp_path):
    logs = tmp_path / "logs"
    result = run_job(2, OUTPUT_SCRIPT, timeout=45, args=("--output-filename", str(logs)))
    for r in range(2):
        assert f"[{r}]<stdout>: hello from {r}\n" in result.stdout
        assert f"[{r}]<stderr>: trouble on {r}\n" in result.stderr
        assert f"[{r}]<stdout>: no newline at the end {r}\n" in result.stdout
        log = (logs / f"rank.{r}.log").read_text()
        assert f"hello from {r}\n" in log and f"trouble on {r}\n" in log
    assert rank_output(result.stdout, 1) == "hello from 1\nno newline at the end 1"


DIES_IN_LOOP = """
import os, sys, time, numpy as np, tfring
tfring.init()
for i in range(1000000):
    if tfring.rank() == 1 and i == 30:
        print("DYING", time.time(), flush=True)
        if sys.argv[1] == "kill":
            os.kill(os.getpid(), 9)
        sys.exit(3)
    tfring.allreduce(np.ones(1000, np.float32), name="grad")
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
@pytest.mark.parametrize("np_,how", [(2, "exit"), (3, "exit"), (3, "kill")])
def test_a_dying_rank_stops_the_job_and_is_named(np_, how):
    result = run_job(np_, DIES_IN_LOOP, timeout=45, script_args=(how,), check=False)
    end = time.time()
    died = float(rank_output(result.stdout, 1).split("DYING ")[1].split()[0])
    report = format_job_output(result.stdout, result.stderr)
    assert end - died < 10, report
    if how == "exit":
        assert result.returncode == 3, report
        assert "tfringrun: rank 1 (pid " in result.stderr and ") exited with code 3 first" in result.stderr, report
    else:
        assert result.returncode == 128 + 9, report
        assert ") was killed by signal 9 (SIGKILL) first" in result.stderr, report
    for r in range(np_):
        if r != 1:  # survivors fail with an error naming the dead rank
            out = rank_output(result.stderr, r)
            assert "PeerLostError" in out or "PreconditionError" in out, report
            assert "rank 1 is gone" in out or "rank 1 has shut down" in out, report


BOTH_FAIL = """
import atexit, time, numpy as np, tfring
tfring.init()
tfring.allreduce(np.ones(4), name="ready")
if tfring.rank() == 0:
    atexit.register(time.sleep, 60)  # a slow exit (TensorFlow's teardown): the launcher's SIGTERM ends it
else:
    time.sleep(0.5)  # rank 0 prints its traceback first, rank 1 exits first
raise ValueError(f"the same error on rank {tfring.rank()}")
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_a_rank_stopped_while_exiting_from_its_own_error_is_reported_with_it():
    """Issue 40: both ranks failed with the same error; the report said '0: SIGTERM'."""
    result = run_job(2, BOTH_FAIL, timeout=45, check=False)
    report = format_job_output(result.stdout, result.stderr)
    assert result.returncode == 1, report
    assert ("exit codes by rank: 0: failed with ValueError: the same error on rank 0 (then stopped by SIGTERM), "
            "1: 1") in result.stderr, report


SIGNAL_SCRIPT = """
import os, signal, sys, time, numpy as np, tfring
if sys.argv[1] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
tfring.init()
tfring.allreduce(np.ones(4))
print("READY", os.getpid(), flush=True)
while True:
    tfring.allreduce(np.ones(4), name="tick")
    time.sleep(0.01)
"""


def _start_launcher(np_, script, tmp_path, args=(), script_args=()):
    path = tmp_path / "job.py"
    path.write_text(script)
    cmd = [*LAUNCHER, "-np", str(np_), *args, sys.executable, str(path), *script_args]
    proc = subprocess.Popen(cmd, env=job_env(), cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    lines, ready = [], threading.Event()

    def read():
        for line in proc.stdout:
            lines.append(line)
            if sum("READY" in li for li in lines) == np_:
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    return proc, lines, ready


def _pids_alive(pids):
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(")")[-1].split()[0] != "Z":
                    alive.append(pid)
        except (ProcessLookupError, FileNotFoundError):
            pass
    return alive


@pytest.mark.multiprocess
@pytest.mark.timeout(90)
@pytest.mark.parametrize("signum,code,mode", [(signal.SIGTERM, 143, "plain"), (signal.SIGINT, 130, "plain"),
                                              (signal.SIGTERM, 143, "stubborn")])
def test_signal_to_the_launcher_stops_every_worker(tmp_path, signum, code, mode):
    proc, lines, ready = _start_launcher(3, SIGNAL_SCRIPT, tmp_path, args=("--grace-period-s", "1"),
                                         script_args=(mode,))
    try:
        assert ready.wait(60), "".join(lines)
        pids = [int(li.split("READY")[1]) for li in lines if "READY" in li]
        t0 = time.time()
        proc.send_signal(signum)
        proc.wait(timeout=30)
        elapsed = time.time() - t0
        stderr = proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == code, stderr
    assert _pids_alive(pids) == [], stderr
    assert f"got {signal.Signals(signum).name}; passing it on to 3 rank(s)" in stderr
    assert elapsed < (5 if mode == "plain" else 8), stderr  # stubborn: SIGKILL after 1 s grace


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_bad_setting_exits_2_naming_the_variable_before_starting_anything(tmp_path):
    marker = tmp_path / "started"
    script = f"open({str(marker)!r}, 'w').close()\n"
    result = run_job(2, script, timeout=30, args=("--cycle-time-ms", "-1"), check=False)
    assert result.returncode == 2
    assert "TFRING_CYCLE_TIME_MS" in result.stderr and "--cycle-time-ms -1" in result.stderr
    result = run_job(2, script, timeout=30, env={"TFRING_LOG_LEVEL": "loud"}, check=False)
    assert result.returncode == 2 and "environment variable TFRING_LOG_LEVEL" in result.stderr
    assert not marker.exists()


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
@pytest.mark.parametrize("args,message", [
    (("-H", "node-17.example.invalid:2", "--network-interface", "nosuch0"), "'nosuch0'"),
    (("--hostfile", "/nonexistent/hosts"), "cannot read it"),
    (("--bogus-flag",), "unrecognized arguments"),
])
def test_bad_command_lines_exit_2(args, message):
    result = run_job(2, "print('never')", timeout=30, args=args, check=False)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "never" not in result.stdout


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_secret_never_appears_in_argv_output_or_logs(tmp_path):
    script = f"""
import os, numpy as np, tfring
secret = os.environ["TFRING_SECRET"]
with open({str(tmp_path)!r} + "/secret." + os.environ["TFRING_RANK"], "w") as f:
    f.write(secret)
for pid in (os.getpid(), os.getppid()):
    with open(f"/proc/{{pid}}/cmdline", "rb") as f:
        print("secret in argv of", pid, ":", secret.encode() in f.read(), flush=True)
tfring.init()
tfring.allreduce(np.ones(3))
print("config", tfring.config()["TFRING_SECRET"][0], flush=True)
"""
    logs = tmp_path / "logs"
    result = run_job(2, script, timeout=45, args=("--verbose", "--log-level", "trace", "--output-filename", str(logs)))
    secret = (tmp_path / "secret.0").read_text()
    assert len(secret) == 64 and (tmp_path / "secret.1").read_text() == secret
    everything = result.stdout + result.stderr + "".join(p.read_text() for p in logs.iterdir())
    assert secret not in everything
    assert secret[:16] not in everything
    assert "secret in argv of" in result.stdout and ": True" not in result.stdout
    assert "config <hidden>" in result.stdout


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_leftover_grandchildren_are_stopped_and_do_not_hold_the_launcher(tmp_path):
    script = """
import subprocess
p = subprocess.Popen(["sleep", "300"])  # inherits the worker's stdout/stderr pipes
print("GRANDCHILD", p.pid, flush=True)
"""
    t0 = time.time()
    result = run_job(2, script, timeout=45)
    pids = [int(li.split()[1]) for r in range(2) for li in rank_output(result.stdout, r).splitlines()]
    assert len(pids) == 2
    assert time.time() - t0 < 20
    deadline = time.time() + 5
    while _pids_alive(pids) and time.time() < deadline:
        time.sleep(0.1)
    assert _pids_alive(pids) == []


OVERSUBSCRIBED = "ranks on this host, which has"


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="needs Linux affinity masks")
def test_one_warning_when_the_ranks_outnumber_the_cpus():
    # the launcher runs on (at most) 2 of this machine's CPUs, so its count is real
    cpus = sorted(os.sched_getaffinity(0))[:2]
    for np_, warned in [(len(cpus) + 1, True), (len(cpus), False)]:
        out = subprocess.run([*LAUNCHER, "-np", str(np_), sys.executable, "-c", "print('ran')"], env=job_env(),
                             check=False, capture_output=True, text=True, timeout=45,
                             preexec_fn=lambda: os.sched_setaffinity(0, cpus))
        assert out.returncode == 0 and out.stdout.count("ran") == np_, out.stderr
        if warned:
            assert out.stderr.count(OVERSUBSCRIBED) == 1, out.stderr  # the launcher's, not every rank's
            assert f"tfringrun: warning: {np_} ranks on this host, which has {len(cpus)} CPU" in out.stderr
        else:
            assert OVERSUBSCRIBED not in out.stderr, out.stderr


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_oversubscription_warning_follows_the_cpu_count_and_log_level(monkeypatch, capfd):
    from tfring._runner import binding, launch

    monkeypatch.setattr(binding, "cpu_count", lambda: 1)
    command = ["--", sys.executable, "-c", "print('ran')"]
    for argv, warned in [(["-np", "2"], True), (["-np", "1"], False),
                         (["-np", "2", "--log-level", "warning,cpu=error"], False)]:
        assert launch.launch_job(args_lib.parse(argv + command), environ=job_env()) == 0
        out, err = capfd.readouterr()
        assert out.count("ran") == int(argv[1]), err
        assert err.count("tfringrun: warning: 2 ranks on this host, which has 1 CPU for them") == int(warned), err


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_command_not_found_exits_127():
    out = subprocess.run([*LAUNCHER, "-np", "2", "/nonexistent/program"], env=job_env(), check=False,
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 127, out.stderr
    assert "rank 0 could not start '/nonexistent/program'" in out.stderr


@pytest.mark.timeout(60)
def test_check_build_lists_features():
    out = subprocess.run([*LAUNCHER, "--check-build"], env=job_env(), check=False, capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    assert "[X] cpu" in out.stdout and "tcp" in out.stdout
