"""Soak: an elastic job on emulated hosts through many random host-level faults (issue 32).
Not a CI test (it runs for minutes); tests/test_host_faults.py runs one fault of it.

    sudo .venv/bin/python -m benchmarks.scale.host_soak --faults 10 [--hosts 3 --ranks 2]
        [--worker numpy|keras] [--kinds kill cut freeze] [--keep-listed] [--seed 1]
        [--minutes 15] [--json docs/benchmarks/host_faults.json]

The job: ``tfringrun --min-np 2 --max-np H*R --host-discovery-script`` over H emulated
hosts x R slots (benchmarks/scale/netns.py, each host its own hostname), peer timeout 2 s,
a commit every 10 steps. Workers: ``numpy`` (default), the light tests/workers/elastic_numpy.py
(NumPy API: data-parallel least squares under ``tfring.elastic.run``); ``keras``, an elastic
Keras ``fit`` (benchmarks/scale/elastic_keras_worker.py): 6 TensorFlow processes of ~500 MB,
and each return of a host waits for two TensorFlow imports (waits are 4x longer).
``--keep-listed``: the discovery script never learns of the fault (a partition only the
job sees).

Each round, once the job runs at full size: a random moment (0.5-3 s), a random fault
(kill, cut or freeze) on a random host other than host 0 (rank 0's; the store is served
from this namespace), and the discovery script stops listing that host (unless
``--keep-listed``). The round waits
for the job to go on at the smaller size, lets it train, heals the host (link up, SIGCONT;
what was left of it is stopped by the driver or exits by itself) and lists it again, then
waits for the full size. Reported per fault: seconds from the fault to the survivors'
reset (re-formed, before the sync) and to the first commit at the smaller size, steps lost
(undone by the restore: at most one commit interval), seconds from listing the host again
to the first commit at full size; at the end whether the job exited 0, whether every
worker's final weights are bit-for-bit the same, and whether any process was left in a host.
"""

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from benchmarks.scale.host_faults import HostFaults
from benchmarks.scale.netns import NetnsHosts, remote_command, unavailable

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKERS = {"numpy": os.path.join(ROOT, "tests", "workers", "elastic_numpy.py"),
           "keras": os.path.join(ROOT, "benchmarks", "scale", "elastic_keras_worker.py")}
LAUNCHER = [sys.executable, "-m", "tfring.runner.launch"]
PEER_TIMEOUT_S = 2.0
COMMIT_EVERY = 10
_LINE = re.compile(r"^\[(w\d+)\]<(?:stdout|stderr)>: ?(.*)$")


class ElasticHostJob:
    """An elastic job of the light worker over the hosts of ``faults`` (a HostFaults),
    its hosts given by a discovery script that this object rewrites. Output lines are kept
    with the time they arrived. Always ``stop()`` it (a context manager does)."""

    def __init__(self, faults, out_dir, ranks_per_host=2, steps=10 ** 9, commit_every=COMMIT_EVERY, sleep_s=0.02,
                 peer_timeout_s=PEER_TIMEOUT_S, extra_args=(), env=None, worker="numpy"):
        self.faults, self.hosts, self.out_dir = faults, faults.hosts, out_dir
        self.ranks_per_host = ranks_per_host
        self.hosts_file = os.path.join(out_dir, "hosts.txt")
        self.stop_file = os.path.join(out_dir, "stop")
        self.listed = list(range(len(self.hosts.names)))
        self._write_hosts()
        script = os.path.join(out_dir, "discover.sh")
        with open(script, "w") as f:
            f.write(f"#!/bin/sh\ncat {self.hosts_file}\n")
        os.chmod(script, 0o755)
        cfg = {"steps": steps, "commit_every": commit_every, "sleep_s": sleep_s, "stop_file": self.stop_file}
        self.cmd = [*LAUNCHER, "--min-np", "2", "--max-np", str(len(self.hosts.names) * ranks_per_host),
                    "--host-discovery-script", script, "--discovery-interval-s", "0.2",
                    "--network-interface", self.hosts.interface, "--remote-command", remote_command(True),
                    "--blacklist-cooldown-range", "1", "2", "--peer-timeout-s", str(peer_timeout_s),
                    "--grace-period-s", "2", *extra_args, sys.executable, WORKERS[worker], json.dumps(cfg), out_dir]
        self.patience = 1 if worker == "numpy" else 4  # TensorFlow workers start in seconds, not 0.2 s
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p),
                        OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2", **(env or {}))
        self.lines = []  # (arrival time.time(), line)
        self._lock = threading.Lock()
        self.proc = None

    def _write_hosts(self):
        tmp = self.hosts_file + ".tmp"
        with open(tmp, "w") as f:
            f.writelines(f"{self.hosts.names[i]}:{self.ranks_per_host}\n" for i in self.listed)
        os.replace(tmp, self.hosts_file)  # the script never reads a half-written list

    def list_hosts(self, indices):
        """The discovery script lists these hosts (indices) from now on."""
        self.listed = sorted(indices)
        self._write_hosts()

    def start(self):
        self.proc = subprocess.Popen(self.cmd, env=self.env, cwd=ROOT, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                                     start_new_session=True)
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def _read(self):
        for line in self.proc.stdout:
            with self._lock:
                self.lines.append((time.time(), line.rstrip("\n")))

    def text(self):
        with self._lock:
            return "\n".join(line for _, line in self.lines)

    def events(self, word):
        """[(worker, {key: value}), ...] of the worker lines starting with ``word``."""
        out = []
        with self._lock:
            lines = [line for _, line in self.lines]
        for line in lines:
            m = _LINE.match(line)
            if m and m.group(2).startswith(word + " "):
                fields = dict(kv.split("=", 1) for kv in m.group(2).split()[1:] if "=" in kv)
                out.append((m.group(1), fields))
        return out

    def progress(self):
        """(step, size, time) of the latest commit rank 0 reported, or None."""
        last = self.events("PROGRESS")
        if not last:
            return None
        f = last[-1][1]
        return int(f["step"]), int(f["size"]), float(f["t"])

    def wait_for(self, condition, timeout_s, what):
        """Polls ``condition()`` until true; raises TimeoutError naming ``what`` (and the
        job's last lines) after ``timeout_s`` or when the job ended first."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        tail = "\n".join(self.text().splitlines()[-40:])
        raise TimeoutError(f"{what}: not within {timeout_s:g} s (job exit {self.proc.poll()})\n{tail}")

    def wait_size(self, size, after_step=0, timeout_s=60):
        """Waits for a commit at ``size`` ranks past ``after_step``; returns (step, size, t)."""
        return self.wait_for(lambda: (p := self.progress()) and p[1] == size and p[0] > after_step and p,
                             timeout_s * self.patience, f"a commit at size {size} after step {after_step}")

    def finish(self, timeout_s=60):
        """Asks the job to end at its next commit; returns tfringrun's exit code."""
        open(self.stop_file, "w").close()
        self.proc.wait(timeout=timeout_s)
        time.sleep(0.2)  # the reader's last lines
        return self.proc.returncode

    def finals(self):
        """{worker: fields} of the FINAL lines."""
        return dict(self.events("FINAL"))

    def weights_identical(self):
        """True when every final_<worker>.npy holds the same bits (and there is one)."""
        arrays = [np.load(os.path.join(self.out_dir, n)) for n in sorted(os.listdir(self.out_dir))
                  if n.startswith("final_")]
        return bool(arrays) and all(a.tobytes() == arrays[0].tobytes() for a in arrays)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def fault_round(job, kind, host, rng=None, heal_after_steps=30, unlist=True):
    """One fault on ``host`` of a job running at full size, and its return; a dict of what
    was measured. ``unlist``: the discovery script stops listing the host at the fault
    (else it never knows: a partition only the job sees). Raises TimeoutError when the job
    does not recover in time."""
    full = len(job.hosts.names) * job.ranks_per_host
    smaller = full - job.ranks_per_host
    job.wait_size(full)
    if rng is not None:
        time.sleep(float(rng.uniform(0.5, 3.0)))  # a random moment of the training
    step0 = job.progress()[0]
    marks = len(job.lines)
    if unlist:
        job.list_hosts([i for i in job.listed if i != host])
    fault = job.faults.apply(kind, host)
    step, _, resumed_at = job.wait_size(smaller, after_step=0, timeout_s=90)
    resets = [(t, line) for t, line in job.lines[marks:] if "RESET " in line and f"size={smaller}" in line]
    restored = [line for _, line in job.lines[marks:] if "RESTORED " in line]
    lost = [int(re.search(r"lost=(\d+)", line).group(1)) for line in restored]
    at_step, _, _ = job.wait_size(smaller, after_step=step + heal_after_steps, timeout_s=90)
    if kind == "cut":
        job.faults.heal(host)
    elif kind == "freeze":
        job.faults.thaw(host)
    relisted = time.time()
    job.list_hosts(sorted({*job.listed, host}))
    _, _, back_at = job.wait_size(full, after_step=at_step, timeout_s=90)
    return {"kind": kind, "host": fault.name, "at_step": step0, "to_reset_s": round(resets[0][0] - fault.at, 3)
            if resets else None, "to_first_commit_s": round(resumed_at - fault.at, 3),
            "steps_lost": max(lost) if lost else 0, "back_to_full_size_s": round(back_at - relisted, 3)}


def soak(args):
    rng = np.random.default_rng(args.seed)
    rounds, result = [], {}
    deadline = time.monotonic() + args.minutes * 60
    with NetnsHosts(args.hosts, prefix="tsl") as hosts, tempfile.TemporaryDirectory(prefix="tfring-soak-") as out:
        faults = HostFaults(hosts)
        try:
            with ElasticHostJob(faults, out, ranks_per_host=args.ranks, worker=args.worker) as job:
                started = time.time()
                for i in range(args.faults):
                    if time.monotonic() > deadline:
                        print(f"time is up after {i} faults", flush=True)
                        break
                    kind = args.kinds[int(rng.integers(len(args.kinds)))]
                    host = int(rng.integers(1, args.hosts))
                    try:
                        r = fault_round(job, kind, host, rng, unlist=not args.keep_listed)
                    except TimeoutError as e:
                        print(f"fault {i + 1} ({kind} of host {host}) not survived: {e}", flush=True)
                        rounds.append({"kind": kind, "host": hosts.names[host], "survived": False})
                        break
                    r["survived"] = True
                    rounds.append(r)
                    print(f"fault {i + 1}/{args.faults}: {json.dumps(r)}", flush=True)
                code = job.finish(timeout_s=60 * job.patience)
                if args.log:
                    with open(args.log, "w") as f:
                        f.write(job.text() + "\n")
                finals = job.finals()
                result = {"exit_code": code, "seconds": round(time.time() - started, 1),
                          "final_step": sorted({int(f["step"]) for f in finals.values()}),
                          "final_workers": len(finals), "weights_identical": job.weights_identical(),
                          "sha": sorted({f["sha"] for f in finals.values()})}
        finally:
            result["left_in_hosts"] = faults.stop_all()
    survived = [r for r in rounds if r.get("survived")]

    def stats(key, rows=survived):
        values = [r[key] for r in rows if r.get(key) is not None]
        return {"median": round(statistics.median(values), 3), "max": max(values), "n": len(values)} if values else None

    keys = ("to_reset_s", "to_first_commit_s", "steps_lost", "back_to_full_size_s")
    by_kind = {kind: {key: stats(key, [r for r in survived if r["kind"] == kind]) for key in keys}
               for kind in sorted({r["kind"] for r in survived})}
    return {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.node()} ({os.cpu_count()} CPUs)",
            "hosts": args.hosts, "ranks_per_host": args.ranks, "seed": args.seed, "keep_listed": args.keep_listed,
            "worker": os.path.relpath(WORKERS[args.worker], ROOT),
            "faults_injected": len(rounds), "faults_survived": len(survived),
            "to_reset_s": stats("to_reset_s"), "to_first_commit_s": stats("to_first_commit_s"),
            "steps_lost": stats("steps_lost"), "back_to_full_size_s": stats("back_to_full_size_s"),
            "by_kind": by_kind, "peer_timeout_s": PEER_TIMEOUT_S, "commit_every": COMMIT_EVERY,
            "rounds": rounds, **result}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faults", type=int, default=10)
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--ranks", type=int, default=2, help="ranks (slots) per host")
    parser.add_argument("--kinds", nargs="+", default=["kill", "cut", "freeze"], choices=["kill", "cut", "freeze"])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--worker", choices=sorted(WORKERS), default="numpy",
                        help="numpy: tests/workers/elastic_numpy.py (light); keras: an elastic Keras fit "
                             "(benchmarks/scale/elastic_keras_worker.py, TensorFlow in every worker)")
    parser.add_argument("--keep-listed", action="store_true",
                        help="the discovery script keeps listing a failed host (a fault only the job sees)")
    parser.add_argument("--minutes", type=float, default=15, help="no new fault after this long")
    parser.add_argument("--json")
    parser.add_argument("--log", help="write the job's whole output there")
    args = parser.parse_args()
    why = unavailable()
    if why:
        sys.exit(f"host soak: {why}")
    report = soak(args)
    print(json.dumps({k: v for k, v in report.items() if k != "rounds"}, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    ok = (report["faults_survived"] == report["faults_injected"] and report.get("exit_code") == 0
          and report.get("weights_identical") and not report.get("left_in_hosts"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
