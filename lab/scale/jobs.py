"""Runs one probe job (lab/scale/probe.py under ``tfringrun``), on this host or on
emulated hosts, bounded in time, and reduces the ranks' files to one row of figures.

A job never outlives its timeout: tfringrun gets SIGTERM (it stops its ranks, SIGKILL
after its grace period), then its process group gets SIGKILL, then any probe process
still naming this job's output folder is killed by pid.
"""

import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROBE = os.path.join(HERE, "probe.py")
# tfringrun beside this interpreter (a venv's bin/), else the same launcher as a module
_SCRIPT = os.path.join(os.path.dirname(sys.executable), "tfringrun")
LAUNCHER = [_SCRIPT] if os.path.exists(_SCRIPT) else [sys.executable, "-m", "tfring.runner.launch"]


def _kill_leftovers(marker):
    """SIGKILLs this job's probe processes still running (their command line names ``marker``)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read() and int(pid) != os.getpid():
                    os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def launch(np_, probe_args=(), shm=True, hosts=None, ranks_per_host=None, timeout_s=300, env=None, probe=PROBE):
    """Runs the probe (``probe``: another rank script taking ``--out``) at ``np_`` ranks
    (``hosts``: a NetnsHosts, ``ranks_per_host`` on each)
    and returns ``{"ranks": [per-rank dicts], "returncode", "t_launch", "t_exit", "stderr_tail",
    "killed": {...} or None, "loadavg_before": [...], "timed_out": bool}``."""
    out = tempfile.mkdtemp(prefix="tfring-scale-")
    cmd = [*LAUNCHER, "-np", str(np_)]
    if hosts is not None:
        cmd += hosts.launch_args(ranks_per_host)
    cmd += [sys.executable, probe, "--out", out, *map(str, probe_args)]
    job_env = {**os.environ, "OMP_NUM_THREADS": "1", "TFRING_SHM": "1" if shm else "0",
               "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {})}
    loadavg = os.getloadavg()
    t_launch = time.time()
    proc = subprocess.Popen(cmd, env=job_env, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        proc.send_signal(signal.SIGTERM)
        try:
            stdout, stderr = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        _kill_leftovers(out)
    t_exit = time.time()
    ranks = []
    for r in range(np_):
        path = os.path.join(out, f"rank{r}.json")
        if os.path.exists(path):
            with open(path) as f:
                ranks.append(json.load(f))
    killed = None
    if os.path.exists(os.path.join(out, "killed.json")):
        with open(os.path.join(out, "killed.json")) as f:
            killed = json.load(f)
    shutil.rmtree(out, ignore_errors=True)
    by_rank = {d["rank"]: d for d in ranks}
    for line in (stderr or "").splitlines():  # TFRING_LOG_LEVEL=warning,runtime=debug: init_trace.h
        m = _INIT_PHASE.search(line)
        if m and int(m.group(1)) in by_rank:
            by_rank[int(m.group(1))].setdefault("init_phases", {})[m.group(2)] = float(m.group(3))
    return {"np": np_, "ranks": ranks, "returncode": proc.returncode, "t_launch": t_launch, "t_exit": t_exit,
            "killed": killed, "timed_out": timed_out, "loadavg_before": loadavg,
            "stderr_tail": (stderr or "")[-2000:], "stdout_tail": (stdout or "")[-1000:]}


# One line of cc/core/base/init_trace.h: the rank, the phase, its wall-clock time.
_INIT_PHASE = re.compile(r":rank (\d+):pid \d+\] runtime: init phase (\w+) at ([\d.]+)")

# Init's events in the order they happen on a rank: the probe's own timestamps and the
# phases init_trace.h logs (only with TFRING_LOG_LEVEL=warning,runtime=debug).
INIT_EVENTS = ("t_process_start", "t_import", "t_init_call", "start", "store", "layout", "mesh", "shm",
               "greeted", "t_init_done")


def init_timeline(job):
    """Each init event's time after tfringrun started, over the ranks: {event: [min, median,
    max]} (events no rank logged are left out)."""
    out = {}
    for event in INIT_EVENTS:
        times = [d.get(event, d.get("init_phases", {}).get(event)) for d in job["ranks"]]
        times = [t - job["t_launch"] for t in times if t is not None]
        if times:
            out[event] = [min(times), statistics.median(times), max(times)]
    return out


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(job):
    """One row of figures from a probe job (see lab/records/scaling.md for each one's meaning).
    Raises RuntimeError when ranks are missing (the job failed: its stderr is quoted)."""
    ranks = sorted(job["ranks"], key=lambda d: d["rank"])
    if len(ranks) != job["np"] or job["timed_out"]:
        raise RuntimeError(f"probe job at {job['np']} ranks: {len(ranks)} rank files, exit {job['returncode']}"
                           f"{' (timed out)' if job['timed_out'] else ''}: {job['stderr_tail'][-800:]}")
    r0, others = ranks[0], ranks[1:]
    row = {
        "np": job["np"], "returncode": job["returncode"], "loadavg_before": job["loadavg_before"],
        "init_from_launch_s": max(d["t_init_done"] for d in ranks) - job["t_launch"],
        "init_from_process_start_s": max(d["t_init_done"] - d["t_process_start"] for d in ranks),
        "init_call_s": max(d["t_init_done"] - d["t_init_call"] for d in ranks),
        # init once every rank had called it: what the ranks' start (on these 2 cores) leaves
        "init_after_last_call_s": max(d["t_init_done"] for d in ranks) - max(d["t_init_call"] for d in ranks),
        "init_timeline": init_timeline(job),
        # CPU the ranks spent starting (interpreter, imports) and inside init(), summed over ranks
        "ranks_cpu_s_to_init_call": sum(d.get("cpu_s_at_init_call", 0.0) for d in ranks),
        "ranks_cpu_s_in_init": sum(d.get("cpu_s_in_init", 0.0) for d in ranks),
        "rank0_fds": r0["fds"]["total"], "rank0_sockets": r0["fds"]["by_kind"].get("socket", 0),
        "other_fds_max": max((d["fds"]["total"] for d in others), default=None),
        "rank0_fds_after_work": r0.get("fds_after_work", {}).get("total"),
        "other_fds_after_work_max": max((d["fds_after_work"]["total"] for d in others if "fds_after_work" in d),
                                        default=None),
        "other_sockets_max": max((d["fds"]["by_kind"].get("socket", 0) for d in others), default=None),
        "rank0_rss_mb": r0["memory_kb"]["VmRSS"] / 1024,
        "other_rss_mb_median": _median([d["memory_kb"]["VmRSS"] / 1024 for d in others]),
        "rss_mb_total": sum(d["memory_kb"]["VmRSS"] for d in ranks) / 1024,
        # shared-memory rings mapped after init (each ring once per end) and their pages touched
        "ring_maps_max": max((d["memory_kb"].get("ring_maps", 0) for d in ranks), default=None),
        "ring_maps_total": sum(d["memory_kb"].get("ring_maps", 0) for d in ranks),
        "rss_shmem_mb_median": _median([d["memory_kb"].get("RssShmem", 0) / 1024 for d in ranks]),
        "vm_size_mb_median": _median([d["memory_kb"].get("VmSize", 0) / 1024 for d in ranks]),
    }
    row.update(store_traffic(ranks))
    if "latency_8b_s" in r0:
        row["latency_8b_s"] = _median([d["latency_8b_s"]["median"] for d in ranks])
        cpu = [d["latency_8b_s"]["cpu_s_per_call"] for d in ranks if "cpu_s_per_call" in d["latency_8b_s"]]
        if cpu:  # the whole process's CPU (every thread) per 8-byte allreduce, mean over the ranks
            row["latency_8b_cpu_s_mean"] = statistics.mean(cpu)
        step = r0["step"]
        row.update({
            "step_s": max(d["step"]["median_s"] for d in ranks),
            "rank0_control_messages_per_step": step["per_step"]["control_messages_sent"],
            "rank0_control_bytes_per_step": step["per_step"]["control_bytes_sent"],
            "other_control_messages_per_step_max": max(d["step"]["per_step"]["control_messages_sent"] for d in others),
            "other_control_messages_per_step_mean": statistics.mean(
                d["step"]["per_step"]["control_messages_sent"] for d in others),
            "other_control_bytes_per_step_mean": statistics.mean(
                d["step"]["per_step"]["control_bytes_sent"] for d in others),
            "rank0_cpu_s_per_step": step["cpu_s_per_step"],
            "other_cpu_s_per_step_median": _median([d["step"]["cpu_s_per_step"] for d in others]),
            "collectives_per_step": step["per_step"]["collectives"],
            "heartbeat_rank0_bytes_sent_per_s": r0["idle"].get("bytes_sent_per_s"),
            "heartbeat_rank0_bytes_received_per_s": r0["idle"].get("bytes_received_per_s"),
            "idle_control_messages": sum(d["idle"]["control_messages_sent"] for d in ranks),
            "shutdown_s": max(d["shutdown"]["seconds"] for d in ranks),
            "exit_after_shutdown_s": job["t_exit"] - max(d["shutdown"]["t_start"] for d in ranks),
            "big_s": {size: max(d["big"][size]["median_s"] for d in ranks) for size in r0["big"]},
        })
    if job["killed"]:
        k = job["killed"]
        survivors = [d for d in ranks if d["rank"] != k["rank"]]
        named = [d for d in survivors if "kill" in d and f"rank {k['rank']}" in d["kill"]["message"]]
        row["kill"] = {
            "rank": k["rank"], "signal": k.get("signal", "KILL"), "survivors": len(survivors),
            "survivors_named": len(named),
            "detect_max_s": max((d["kill"]["t_error"] - k["t_kill"] for d in named), default=None),
            "detect_median_s": _median([d["kill"]["t_error"] - k["t_kill"] for d in named]),
            "launcher_exit_s": job["t_exit"] - k["t_kill"],
            "message": named[0]["kill"]["message"] if named else None,
            "error_type": named[0]["kill"]["error_type"] if named else None,
        }
    return row


def store_traffic(ranks):
    """What the ranks' store connections moved (the kernel's byte counters, probe.store_bytes):
    up to the end of init, in all and at the busiest rank, and while every rank was idle (per
    second). Empty where the probe did not record them."""
    init = [d.get("store_bytes_after_init") for d in ranks]
    if any(v is None for v in init):
        return {}
    row = {"store_bytes_read_init": sum(v[1] for v in init), "store_bytes_written_init": sum(v[0] for v in init),
           "store_bytes_read_init_max": max(v[1] for v in init),
           "store_bytes_read_init_rank0": init[0][1]}
    row["store_bytes_read_init_per_rank"] = row["store_bytes_read_init"] / len(ranks)
    idle = [(d.get("store_bytes_idle_start"), d.get("store_bytes_idle_end"), d.get("idle", {}).get("store_seconds"))
            for d in ranks]
    if all(a and b and s for a, b, s in idle):
        row["store_bytes_read_idle_per_s"] = sum((b[1] - a[1]) / s for a, b, s in idle)
        row["store_bytes_written_idle_per_s"] = sum((b[0] - a[0]) / s for a, b, s in idle)
        row["store_bytes_read_idle_rank0_per_s"] = (idle[0][1][1] - idle[0][0][1]) / idle[0][2]
    busy = [d.get("busy") for d in ranks]
    if all(b and b["store_bytes_before"] and b["store_bytes_after"] for b in busy):
        def per_s(b, i):
            return (b["store_bytes_after"][i] - b["store_bytes_before"][i]) / b["seconds"]
        row["store_bytes_read_busy_per_s"] = sum(per_s(b, 1) for b in busy)
        row["store_bytes_written_busy_per_s"] = sum(per_s(b, 0) for b in busy)
        row["store_bytes_read_busy_rank0_per_s"] = per_s(busy[0], 1)
        row["busy_s"] = busy[0]["seconds"]
    return row


def medians(rows):
    """Per numeric field, the median over repeats (and the range), nested dicts flattened one level."""
    out = {}
    keys = {k for r in rows for k, v in r.items() if isinstance(v, (int, float))}
    for k in sorted(keys):
        values = [r[k] for r in rows if isinstance(r.get(k), (int, float))]
        out[k] = statistics.median(values)
        out[k + "_range"] = [min(values), max(values)]
    big = [r["big_s"] for r in rows if r.get("big_s")]
    if big:
        out["big_s"] = {size: statistics.median(b[size] for b in big) for size in big[0]}
        out["big_s_range"] = {size: [min(b[size] for b in big), max(b[size] for b in big)] for size in big[0]}
    return out
