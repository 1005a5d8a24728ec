"""An elastic job over emulated hosts, and one host-level fault of it with its return:
what tests/test_host_faults*.py run once and lab/scale/host_soak.py runs many times.

    with ElasticHostJob(faults, out_dir) as job:   # faults: a HostFaults over NetnsHosts
        measured = fault_round(job, "kill", 2)     # host 2 lost, the job goes on, host 2 back

The job: ``tfringrun --min-np 2 --max-np H*R --host-discovery-script`` over the H hosts x R
slots, the discovery script rewritten by ``list_hosts``; rank 0 reports each commit.
"""

import json
import os
import re
import subprocess
import sys
import threading
import time

import numpy as np

from tools.hostlab.netns import remote_command

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NUMPY_WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "elastic_numpy.py")
LAUNCHER = [sys.executable, "-m", "tfring.runner.launch"]
PEER_TIMEOUT_S = 2.0
COMMIT_EVERY = 10
_LINE = re.compile(r"^\[(w\d+)\]<(?:stdout|stderr)>: ?(.*)$")


class ElasticHostJob:
    """An elastic job of the light worker over the hosts of ``faults`` (a HostFaults),
    its hosts given by a discovery script that this object rewrites. Output lines are kept
    with the time they arrived. Always ``stop()`` it (a context manager does).

    ``worker``: the script every rank runs (elastic_numpy.py by default; another must print
    the same PROGRESS / RESET / RESTORED / FINAL lines); ``patience``: every wait is that
    many times longer (4 for TensorFlow workers)."""

    def __init__(self, faults, out_dir, ranks_per_host=2, steps=10 ** 9, commit_every=COMMIT_EVERY, sleep_s=0.02,
                 peer_timeout_s=PEER_TIMEOUT_S, extra_args=(), env=None, worker=NUMPY_WORKER, patience=1):
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
                    "--grace-period-s", "2", *extra_args, sys.executable, worker, json.dumps(cfg), out_dir]
        self.patience = patience  # waits x patience: TensorFlow workers start in seconds, not 0.2 s
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
