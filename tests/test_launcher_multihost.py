"""tfringrun on several hosts, without a cluster: the remote spawner (ssh code path) through
``--remote-command`` with a local stand-in for ssh (tests/fake_ssh.py), and hosts made of
network namespaces (``ip netns exec {host} ...``; skipped where not permitted). Workers
are plain Python (NumPy collectives, no TensorFlow); 2-3 ranks each."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.helpers import LAUNCHER, REPO_ROOT, job_env, rank_output, run_job
from tests.ports import unused_port
from tfring._runner import args as args_lib
from tfring._runner import hosts, network, placement, remote, remote_boot
from tfring._runner import settings as settings_lib
from tools.hostlab import netns

FAKE_SSH = f"{sys.executable} {os.path.join(REPO_ROOT, 'tests', 'fake_ssh.py')} {{host}} {{command}}"
FAKE = ("--remote-command", FAKE_SSH, "--network-interface", "lo")

# ---------------------------------------------------------------- no processes


def _place(argv, environ=None):
    ns = args_lib.parse([*argv, "python", "x.py"])
    slots = hosts.plan(ns.hosts and hosts.parse_hosts(ns.hosts), ns.num_proc)
    return placement.place(slots, ns, settings_lib.collect(ns, environ or {}), environ or {})


def test_the_host_lab_finds_iproute2_tools_beyond_a_minimal_path(tmp_path, monkeypatch):
    # env -i PATH=/usr/local/bin:/usr/bin:/bin lacks /usr/sbin, where tc (and on some systems
    # ip) lives: the lab looks there too, and names the tool and its package when it is missing.
    sbin = tmp_path / "sbin"
    sbin.mkdir()
    (sbin / "tc").write_text("#!/bin/sh\n")
    (sbin / "tc").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setattr(netns, "SBIN_DIRS", (str(sbin),))
    assert netns.tool("tc") == str(sbin / "tc")
    with pytest.raises(FileNotFoundError, match=rf"'ip' is neither on PATH nor in {re.escape(str(sbin))}: install "
                                                "the iproute2 package"):
        netns.tool("ip")
    assert netns.unavailable().startswith("needs iproute2: 'ip' is neither on PATH")


def test_remote_command_template():
    words = remote.template_words(ssh_port=2222, ssh_identity_file="/k", environ={})
    assert words[0] == "ssh" and words[-2:] == ["{host}", "{command}"] and "BatchMode=yes" in words
    assert words[words.index("-p") + 1] == "2222" and words[words.index("-i") + 1] == "/k"
    assert remote.template_words(environ={"TFRING_REMOTE_COMMAND": "sh -c {command}"}) == ["sh", "-c", "{command}"]
    spawner = remote.RemoteSpawner("n1", remote.template_words("ip netns exec {host} sh -c {command}"), 5.0,
                                   python="/venv/bin/python", cwd="/my dir")
    assert spawner.argv == ["ip", "netns", "exec", "n1", "sh", "-c",
                            "cd '/my dir' 2>/dev/null; exec /venv/bin/python -m tfring._runner.remote_boot"]
    with pytest.raises(ValueError, match="must contain the word {command}"):
        remote.template_words("ssh {host}")
    with pytest.raises(ValueError, match="built-in ssh command only"):
        remote.template_words("sh -c {command}", ssh_port=22)


def test_placement_of_remote_hosts_and_the_store():
    p = _place(["-H", "localhost:1,fakeb:2", "--network-interface", "lo", "--remote-command", "sh -c {command}"])
    assert p.remote_hosts == ["fakeb"] and p.store_bind == "127.0.0.1" and p.local_bind_addr == "127.0.0.1"
    assert isinstance(p.spawners["fakeb"], remote.RemoteSpawner)
    assert not isinstance(p.spawners["localhost"], remote.RemoteSpawner)
    assert _place(["-np", "2"]).store_bind == "127.0.0.1"
    with pytest.raises(ValueError, match="--network-interface"):
        _place(["-H", "localhost:1,fakeb:1", "--bind-addr", "0.0.0.0"])
    with pytest.raises(ValueError, match="environment variable TFRING_BIND_ADDR"):
        _place(["-H", "fakea:1,fakeb:1", "--network-interface", "lo"], {"TFRING_BIND_ADDR": "1.2.3.4"})
    with pytest.raises(ValueError, match="'nosuch0'.*interfaces here: .*lo"):
        _place(["-H", "fakea:1", "--network-interface", "nosuch0"])


def test_remote_env_leaves_this_machine_behind():
    slot = hosts.plan(None, 1)[0]
    env = remote.worker_env({"PATH": "/bin", "HOSTNAME": "here", "SSH_AUTH_SOCK": "/s", "BASH_FUNC_f%%": "()"},
                            slot, {}, "10.0.0.1:5", "s" * 64)
    assert env["PATH"] == "/bin" and env["TFRING_SECRET"] == "s" * 64 and env["TFRING_STORE_ADDR"] == "10.0.0.1:5"
    assert not {"HOSTNAME", "SSH_AUTH_SOCK", "BASH_FUNC_f%%"} & set(env)
    payload = json.loads(remote_boot.encode_payload(["python", "t.py"], env, "/w", 5.0, "eth0", 0))
    assert payload["command"] == ["python", "t.py"] and payload["network_interface"] == "eth0"


def test_interface_address_and_routes():
    assert network.interface_address("lo") == "127.0.0.1"
    assert "lo" in network.interface_names()
    assert network.route_source_address("127.0.0.1") == "127.0.0.1"
    assert network.route_source_address("no-such-host.invalid") is None


# ---------------------------------------------------------------- jobs through fake ssh

JOB_SCRIPT = """
import json, os, numpy as np, tfring
secret = os.environ["TFRING_SECRET"].encode()
in_argv = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if secret in f.read():
                in_argv.append(int(pid))
    except OSError:
        pass
with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
    parent = f.read().replace(b"\\0", b" ").decode()
tfring.init()
r = tfring.rank()
total = tfring.allreduce(np.arange(4.0) * (r + 1), op=tfring.Sum)
print("RESULT " + json.dumps({
    "ids": [r, tfring.size(), tfring.local_rank(), tfring.local_size(), tfring.cross_rank(), tfring.cross_size()],
    "sum": total.tolist(), "secret_in_argv": in_argv, "parent": parent,
    "host": os.environ.get("FAKE_SSH_HOST"), "bind": os.environ.get("TFRING_BIND_ADDR"),
    "store": os.environ["TFRING_STORE_ADDR"], "cwd": os.getcwd()}), flush=True)
"""


def _results(stdout, np_):
    out = {}
    for r in range(np_):
        line = next(li for li in rank_output(stdout, r).splitlines() if li.startswith("RESULT "))
        out[r] = json.loads(line[7:])
    return out


def _check_job(stdout, np_, host_of_rank, bind_of_rank):
    results = _results(stdout, np_)
    expected = (np.arange(4.0) * sum(range(1, np_ + 1))).tolist()
    for r, res in results.items():
        assert res["sum"] == expected, res
        assert res["secret_in_argv"] == [], f"the job secret is in the command line of {res['secret_in_argv']}"
        assert "tfring._runner.remote_boot" in res["parent"], res  # started through the bootstrap
        assert res["bind"] == bind_of_rank[r]
        assert res["cwd"] == REPO_ROOT
    assert {res["host"] for res in results.values()} >= set(host_of_rank.values()) - {None}
    return results


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_fake_ssh_job_runs_collectives_across_hosts():
    result = run_job(3, JOB_SCRIPT, timeout=45, args=("-H", "fakea:1,fakeb:2", *FAKE))
    results = _check_job(result.stdout, 3, {0: "fakea", 1: "fakeb", 2: "fakeb"}, {r: "127.0.0.1" for r in range(3)})
    assert [results[r]["ids"] for r in range(3)] == [[0, 3, 0, 1, 0, 2], [1, 3, 0, 2, 1, 2], [2, 3, 1, 2, 1, 2]]
    assert [results[r]["host"] for r in range(3)] == ["fakea", "fakeb", "fakeb"]


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_local_and_remote_ranks_in_one_job():
    result = run_job(2, JOB_SCRIPT, timeout=45, args=("-H", "localhost:1,fakeb:1", *FAKE))
    results = _results(result.stdout, 2)
    assert results[0]["host"] is None and "remote_boot" not in results[0]["parent"]
    assert results[1]["host"] == "fakeb" and "remote_boot" in results[1]["parent"]
    assert results[0]["sum"] == results[1]["sum"] == [0.0, 3.0, 6.0, 9.0]


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_bad_remote_setups_fail_before_any_worker_runs():
    if network.own_address() is None:
        result = run_job(2, "print('never')", timeout=30, args=("-H", "fakea:1,fakeb:1", "--remote-command",
                                                                 FAKE_SSH), check=False)
        assert result.returncode == 2 and "--network-interface" in result.stderr, result.stderr
    result = run_job(2, "print('never')", timeout=30, env={"TFRING_REMOTE_COMMAND": "ssh {host}"},
                     args=("-H", "fakea:1,fakeb:1", "--network-interface", "lo"), check=False)
    assert result.returncode == 2 and "TFRING_REMOTE_COMMAND must contain the word {command}" in result.stderr
    assert "never" not in result.stdout
    result = run_job(2, "print('never')", timeout=30, check=False, args=(
        "-H", "fakea:1,fakeb:1", "--network-interface", "lo", "--remote-command", "/nonexistent/ssh {host} {command}"))
    assert result.returncode == 127 and "the remote command '/nonexistent/ssh' for host fakea" in result.stderr


DIE_SCRIPT = """
import os, sys, time, numpy as np, tfring
tfring.init()
tfring.allreduce(np.ones(2))
if tfring.rank() == 1:
    time.sleep(0.2)
    if sys.argv[1] == "kill":
        os.kill(os.getpid(), 9)
    sys.exit(3)
while True:
    tfring.allreduce(np.ones(2))
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
@pytest.mark.parametrize("how,code,words", [("exit", 3, "exited with code 3"),
                                            ("kill", 137, "was killed by signal 9 (SIGKILL)")])
def test_a_dying_remote_rank_stops_the_job_and_is_named(how, code, words):
    t0 = time.monotonic()
    result = run_job(3, DIE_SCRIPT, timeout=45, args=("-H", "fakea:1,fakeb:1,fakec:1", *FAKE),
                     script_args=(how,), check=False)
    assert result.returncode == code, result.stderr
    assert "tfringrun: rank 1 (pid " in result.stderr and f") {words} first" in result.stderr, result.stderr
    assert time.monotonic() - t0 < 20


SLEEP_SCRIPT = """
import os, signal, sys, time
if sys.argv[1:] == ["stubborn"]:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("READY", os.getpid(), flush=True)
try:
    time.sleep(120)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(4)
"""


def _start(tmp_path, script, hosts_arg, extra=(), script_args=(), remote_args=FAKE):
    path = tmp_path / "job.py"
    path.write_text(script)
    cmd = [*LAUNCHER, "-H", hosts_arg, *remote_args, *extra, sys.executable, str(path), *script_args]
    return subprocess.Popen(cmd, env=job_env(), cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _ready_pids(proc, n, timeout=30):
    deadline = time.monotonic() + timeout
    pids = []
    while len(pids) < n:
        assert time.monotonic() < deadline, "workers did not start"
        line = proc.stdout.readline()
        assert line, f"launcher ended early: {proc.stderr.read()}"
        if "READY" in line:
            pids.append(int(line.split()[-1]))
    return pids


def _alive(pids):
    """Pids still running (zombies waiting for a slow init to reap them do not count)."""
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[-1].split()[0] != "Z":
                    alive.append(pid)
        except OSError:
            pass
    return alive


def _wait_gone(pids, timeout=10):
    deadline = time.monotonic() + timeout
    while _alive(pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _alive(pids)


def _ancestor(pid, levels):
    for _ in range(levels):
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[-1].split()[1])
    return pid


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
@pytest.mark.parametrize("signum,code,mode", [(signal.SIGINT, 130, "plain"), (signal.SIGTERM, 143, "plain"),
                                              (signal.SIGTERM, 143, "stubborn")])
def test_signals_reach_remote_workers(tmp_path, signum, code, mode):
    proc = _start(tmp_path, SLEEP_SCRIPT, "fakea:1,fakeb:1", extra=("--grace-period-s", "1"), script_args=(mode,))
    try:
        pids = _ready_pids(proc, 2)
        t0 = time.monotonic()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=20)
        elapsed = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == code, err
    if signum == signal.SIGINT:  # Ctrl-C reaches remote Python workers as KeyboardInterrupt
        assert out.count("interrupted") == 2, out + err
    assert _wait_gone(pids) == []
    assert elapsed < (5 if mode == "plain" else 8), err  # stubborn: SIGKILL through the channel after 1 s


def _lose_one_connection(tmp_path, hosts_arg, remote_args, find_client):
    """Starts 2 sleeping workers, SIGKILLs the local remote-command process that
    ``find_client(launcher_pid, worker_pids)`` names (a lost connection), and checks that
    the job ends naming that rank and no worker is left."""
    proc = _start(tmp_path, SLEEP_SCRIPT, hosts_arg, remote_args=remote_args)
    try:
        pids = _ready_pids(proc, 2)
        os.kill(find_client(proc.pid, pids), signal.SIGKILL)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 137 and "was killed by signal 9 (SIGKILL) first" in err, err
    assert _wait_gone(pids) == []


def _kill_launcher(tmp_path, hosts_arg, remote_args):
    """SIGKILLs tfringrun itself (no clean-up): its remote-command processes die with it
    (PR_SET_PDEATHSIG), so every channel ends and every remote worker is killed."""
    proc = _start(tmp_path, SLEEP_SCRIPT, hosts_arg, remote_args=remote_args)
    try:
        pids = _ready_pids(proc, 2)
        proc.kill()
        proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert _wait_gone(pids) == []


def _fake_client(launcher, pids):
    # worker <- bootstrap (sh -c exec'd it) <- fake ssh client (what tfringrun started)
    client = _ancestor(pids[0], 2)
    with open(f"/proc/{client}/cmdline", "rb") as f:
        assert b"fake_ssh.py" in f.read()
    return client


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_killing_the_launcher_or_the_ssh_client_leaves_no_remote_worker(tmp_path):
    _lose_one_connection(tmp_path, "fakea:1,fakeb:1", FAKE, _fake_client)
    _kill_launcher(tmp_path, "fakea:1,fakeb:1", FAKE)


# ---------------------------------------------------------------- network namespaces


@pytest.fixture
def netns_hosts():
    why = netns.unavailable()
    if why:
        pytest.skip(why)
    hosts_ = netns.NetnsHosts(2)
    try:
        hosts_.create()
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        hosts_.destroy()
        pytest.skip(f"cannot build the namespace network: {e}")
    try:
        yield hosts_
    finally:
        hosts_.destroy()


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_job_across_network_namespaces(netns_hosts):
    a, b = netns_hosts.names
    result = run_job(3, JOB_SCRIPT, timeout=45, args=(
        "-H", f"{a}:1,{b}:2", "--network-interface", netns_hosts.interface,
        "--remote-command", "ip netns exec {host} sh -c {command}"))
    first, second = netns_hosts.addresses
    results = _check_job(result.stdout, 3, {}, {0: first, 1: second, 2: second})
    assert all(res["store"].startswith(f"{netns_hosts.subnet}.1:") for res in results.values())
    assert [results[r]["ids"][4:] for r in range(3)] == [[0, 2], [1, 2], [1, 2]]


HIERARCHICAL_SCRIPT = """
import hashlib
import numpy as np
import tfring
tfring.init()
r, n = tfring.rank(), tfring.size()
x = (np.arange(100003, dtype=np.float32) % 97) * (r + 1)   # 400 KB: past recursive doubling
total = tfring.allreduce(x, op=tfring.Sum, name="big")
mean = tfring.allreduce(x, op=tfring.Average, name="big_mean")
expected = (np.arange(100003, dtype=np.float32) % 97) * (n * (n + 1) / 2)
assert np.array_equal(total, expected), "sum differs"
assert np.allclose(mean, expected / n, rtol=1e-6), "average differs"
rows = np.full((1000 * (r + 1), 3), r, np.int16)                    # first dimensions differ
gathered = tfring.allgather(rows, name="gathered")
assert np.array_equal(gathered[:, 0], np.repeat(np.arange(n), 1000 * (np.arange(n) + 1))), "allgather differs"
sent = tfring.broadcast(x + r, n - 1, name="sent")                     # 400 KB from the last rank
assert np.array_equal(sent, x / (r + 1) * n + n - 1), "broadcast differs"
part = tfring.reducescatter(np.full((1001, 2), r + 1, np.float32), op=tfring.Sum, name="part")
assert part.shape == (1001 // n + (r < 1001 % n), 2) and np.all(part == n * (n + 1) / 2), "reducescatter differs"
digest = hashlib.sha1(total.tobytes() + mean.tobytes() + gathered.tobytes() + sent.tobytes()).hexdigest()
print(f"rank {r}: hierarchical OK {digest}", flush=True)
tfring.shutdown()
"""


@pytest.mark.multiprocess
@pytest.mark.timeout(90)
def test_hierarchical_allreduce_across_two_hosts_of_two_ranks(netns_hosts):
    # 2 emulated hosts x 2 ranks: the allreduce runs inside each host, then across hosts on
    # half the buffer per local rank (cc/core/collectives/hierarchical_allreduce.cc), the allgather
    # across hosts then inside them, the broadcast scattered, across, gathered, the
    # reduce-scatter inside then across; exact
    # results, the same bits on every rank, and rank 0 says which layout it took.
    a, b = netns_hosts.names
    result = run_job(4, HIERARCHICAL_SCRIPT, timeout=75, env={"TFRING_LOG_LEVEL": "info"}, args=(
        "-H", f"{a}:2,{b}:2", "--network-interface", netns_hosts.interface,
        "--remote-command", "ip netns exec {host} sh -c {command}"))
    digests = re.findall(r"rank (\d): hierarchical OK (\w+)", result.stdout)
    assert sorted(r for r, _ in digests) == ["0", "1", "2", "3"], result.stdout
    assert len({d for _, d in digests}) == 1, digests
    assert "hierarchical across 2 hosts x 2 ranks: allreduce, allgather, broadcast, reducescatter" in result.stderr, \
        result.stderr[-2000:]


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_dead_rank_in_a_namespace_stops_the_job(netns_hosts):
    a, b = netns_hosts.names
    result = run_job(2, DIE_SCRIPT, timeout=45, script_args=("kill",), check=False, args=(
        "-H", f"{a}:1,{b}:1", "--network-interface", netns_hosts.interface,
        "--remote-command", "ip netns exec {host} sh -c {command}"))
    assert result.returncode == 137, result.stderr
    assert "rank 1 (pid " in result.stderr and "SIGKILL) first" in result.stderr
    # another host: the core names it (both namespaces share the hostname here)
    assert re.search(r"rank 1 \(host [^)]+\) is gone", rank_output(result.stdout + result.stderr, 0))


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_remote_leftovers_are_reaped_by_the_bootstrap():
    script = """
import subprocess
p = subprocess.Popen(["sleep", "300"])  # inherits the worker's stdout/stderr (the channel)
print("GRANDCHILD", p.pid, flush=True)
"""
    t0 = time.monotonic()
    result = run_job(2, script, timeout=45, args=("-H", "fakea:1,fakeb:1", *FAKE))
    pids = [int(li.split()[1]) for r in range(2) for li in rank_output(result.stdout, r).splitlines()]
    assert len(pids) == 2
    assert time.monotonic() - t0 < 15
    assert _wait_gone(pids) == []


# ---------------------------------------------------------------- a real sshd on this machine


@pytest.fixture
def ssh_config(tmp_path):
    """A private sshd on 127.0.0.1 and an ssh config naming it ``tfrssh1`` and ``tfrssh2``
    (this user, key login). Skips where sshd or ssh is missing or will not start."""
    sshd, ssh_keygen = shutil.which("sshd") or "/usr/sbin/sshd", shutil.which("ssh-keygen")
    if not (os.path.exists(sshd) and ssh_keygen and shutil.which("ssh")):
        pytest.skip("needs OpenSSH (sshd, ssh, ssh-keygen)")
    d = tmp_path / "ssh"
    d.mkdir()
    for key in ("host_key", "user_key"):
        subprocess.run([ssh_keygen, "-q", "-t", "ed25519", "-N", "", "-f", str(d / key)], check=True, timeout=20)
    (d / "authorized_keys").write_text((d / "user_key.pub").read_text())
    port = unused_port()
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nAuthorizedKeysFile {d}/authorized_keys\n"
        "StrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
        f"PermitRootLogin prohibit-password\nPidFile {d}/sshd.pid\n")
    (d / "config").write_text(
        f"Host tfrssh1 tfrssh2\n  HostName 127.0.0.1\n  Port {port}\n  IdentityFile {d}/user_key\n"
        "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n")
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege separation directory
    proc = subprocess.Popen([sshd, "-D", "-f", str(d / "sshd_config"), "-E", str(d / "log")],
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while True:
            probe = subprocess.run(["ssh", "-F", str(d / "config"), "-o", "BatchMode=yes", "tfrssh1", "true"],
                                   check=False, capture_output=True, text=True, timeout=10)
            if probe.returncode == 0:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                log = (d / "log").read_text() if (d / "log").exists() else ""
                pytest.skip(f"cannot log in to a private sshd: {probe.stderr.strip()} {log.strip()}")
            time.sleep(0.1)
        yield str(d / "config")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_job_over_real_ssh(ssh_config, tmp_path):
    template = f"ssh -F {ssh_config} -o BatchMode=yes {{host}} {{command}}"
    args = ("-H", "tfrssh1:1,tfrssh2:1", "--network-interface", "lo", "--remote-command", template)
    result = run_job(2, JOB_SCRIPT, timeout=45, args=args)
    _check_job(result.stdout, 2, {}, {0: "127.0.0.1", 1: "127.0.0.1"})
    result = run_job(2, DIE_SCRIPT, timeout=45, args=args, script_args=("exit",), check=False)
    assert result.returncode == 3 and "rank 1 (pid " in result.stderr and "exited with code 3 first" in result.stderr

    # The ssh client dies (connection lost): sshd closes the channel, the bootstrap kills the worker.
    def ssh_client(launcher, pids):
        out = subprocess.run(["pgrep", "-P", str(launcher), "ssh"], check=False, capture_output=True, text=True,
                             timeout=10)
        clients = [int(p) for p in out.stdout.split()]
        assert len(clients) == 2
        return clients[0]

    _lose_one_connection(tmp_path, "tfrssh1:1,tfrssh2:1", args[2:], ssh_client)
    _kill_launcher(tmp_path, "tfrssh1:1,tfrssh2:1", args[2:])
