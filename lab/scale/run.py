"""The scale lab's driver: runs the probe at each job size, on one host and on emulated
hosts, and writes the results as JSON (lab/results/scale_local.json,
lab/results/scale_hosts.json). ``--report`` then fits the model and renders the plots
and tables (report.py). Needs root for ``--hosts`` (network namespaces, tc).

    python lab/scale/run.py --sizes 2 4 8 16 32 64 --shm off on --repeats 3 --kill
    python lab/scale/run.py --hosts 2x1 2x2 2x4 4x2 --rate-gbit 1 --repeats 3
    python lab/scale/run.py --report

Each job is bounded (jobs.launch's timeout); the emulated hosts are always removed (and
``python -m tools.hostlab.netns --cleanup`` removes what a killed run left).
"""

import argparse
import datetime
import json
import os
import subprocess
import sys

if __package__ in (None, ""):  # run as a script: make ``lab.scale`` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from lab.scale import jobs, model
from tools.hostlab import netns

RESULTS = os.path.join(jobs.ROOT, "lab", "results")
FREEZE_PEER_TIMEOUT_S = 2.0  # the frozen-rank runs' TFRING_PEER_TIMEOUT_S (heartbeat every 0.2 s)
MB_PER_RANK = 60  # a light rank's RSS is ~37 MB; keep headroom for the launcher and others' tests


def available_mb():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    return 0.0


def machine():
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=jobs.ROOT, capture_output=True, text=True,
                            timeout=10, check=False).stdout.strip()
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": commit,
            "cpus": os.cpu_count(), "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30),
            "python": sys.version.split()[0]}


def probe_args(np_, big_bytes=()):
    iters = 200 if np_ <= 16 else 100
    args = ["--latency-iters", iters, "--steps", 40 if np_ <= 16 else 25]
    if big_bytes:
        args += ["--big-bytes", *big_bytes]
    return args


def timeout_for(np_):
    return 90 + 6 * np_


def log(*words):
    print(*words, flush=True)


def summarized(job, label):
    """The job's row, or None (logged with the job's error) when it failed."""
    try:
        return jobs.summarize(job)
    except RuntimeError as e:
        log(f"{label}: FAILED {e}")
        return None


def probe_local(args, np_, shm, i):
    """One probe job at ``np_`` ranks on this host: its row, logged (None when it failed)."""
    job = jobs.launch(np_, probe_args(np_, args.big_bytes if args.local_big else ()), shm=shm == "on",
                      timeout_s=timeout_for(np_))
    r = summarized(job, f"np={np_} shm={shm} run {i}")
    if r is not None:
        log(f"np={np_:3} shm={shm:3} run {i}: init {r['init_from_launch_s']:.2f} s, 8B "
            f"{r['latency_8b_s'] * 1e3:.2f} ms, step {r['step_s'] * 1e3:.1f} ms, rank0 msgs/step "
            f"{r['rank0_control_messages_per_step']:.1f}, fds {r['rank0_fds']} (after work {r['rank0_fds_after_work']}, "
            f"others <= {r['other_fds_after_work_max']}), load {r['loadavg_before'][0]:.1f}")
    return r


def run_local(args, progress=lambda results: None):
    results = []
    for np_ in args.sizes:
        if available_mb() < np_ * MB_PER_RANK * 2:
            log(f"skipping np={np_}: {available_mb():.0f} MB available, want {np_ * MB_PER_RANK * 2}")
            continue
        rows = {shm: [] for shm in args.shm}
        if args.alternate:  # the settings take turns job by job, so they share the same minutes' load
            for i in range(args.repeats):
                for shm in args.shm:
                    rows[shm].append(probe_local(args, np_, shm, i))
        for shm in args.shm:
            if not args.alternate:
                rows[shm] = [probe_local(args, np_, shm, i) for i in range(args.repeats)]
            ok = [r for r in rows[shm] if r is not None]
            kill = None
            if args.kill and shm == "off":
                job = jobs.launch(np_, ["--kill-rank", np_ - 1, "--kill-after", 100], shm=False,
                                  timeout_s=timeout_for(np_))
                kill = summarized(job, f"np={np_} kill run")
                if kill:
                    log(f"np={np_:3} kill: {kill['kill']['survivors_named']}/{kill['kill']['survivors']} named it, "
                        f"max {kill['kill']['detect_max_s']}")
            freeze = None
            if args.freeze and shm == "off":
                job = jobs.launch(np_, ["--kill-rank", np_ - 1, "--kill-after", 100, "--kill-signal", "STOP"],
                                  shm=False, timeout_s=timeout_for(np_) + FREEZE_PEER_TIMEOUT_S,
                                  env={"TFRING_PEER_TIMEOUT_S": str(FREEZE_PEER_TIMEOUT_S)})
                freeze = summarized(job, f"np={np_} freeze run")
                if freeze:
                    log(f"np={np_:3} freeze: {freeze['kill']['survivors_named']}/{freeze['kill']['survivors']} named it, "
                        f"max {freeze['kill']['detect_max_s']}")
            results.append({"np": np_, "shm": shm, "runs": ok, "median": jobs.medians(ok) if ok else None,
                            "kill": kill, "freeze": freeze})
            progress(results)
    return results


def run_hosts(args):
    netns.require("--hosts: ")
    results = []
    rate = args.rate_gbit * 1e9
    for spec in args.hosts:
        h, per_host = netns.parse_hosts(spec)
        np_ = h * per_host
        rows = []
        with netns.NetnsHosts(h, prefix=netns.LAB_PREFIX, rate_bits=rate) as hosts:
            for i in range(args.repeats):
                job = jobs.launch(np_, probe_args(np_, args.big_bytes), hosts=hosts, ranks_per_host=per_host,
                                  shm=args.hosts_shm == "on", timeout_s=timeout_for(np_) + 60)
                r = summarized(job, f"{spec} run {i}")
                if r is None:
                    continue
                rows.append(r)
                big = ", ".join(f"{int(s) >> 20} MiB {t * 1e3:.1f} ms" for s, t in r["big_s"].items())
                log(f"{spec} run {i}: 8B {r['latency_8b_s'] * 1e3:.3f} ms, {big}, load {r['loadavg_before'][0]:.1f}")
        results.append({"hosts": h, "ranks_per_host": per_host, "np": np_, "rate_bits": rate,
                        "shm": args.hosts_shm, "runs": rows,
                        "median": jobs.medians(rows) if rows else None})
    return results


def measure_store():
    from lab.scale import store_cost

    write("store", {"machine": machine(), **store_cost.measure()})


def write(name, payload):
    path = os.path.join(RESULTS, f"scale_{name}.json")
    with open(path, "w") as f:
        json.dump(payload, f, indent=1)
    log(f"wrote {os.path.relpath(path, jobs.ROOT)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[], help="ranks on this host, e.g. 2 4 8 16 32 64")
    parser.add_argument("--shm", nargs="+", choices=["on", "off"], default=["off", "on"])
    parser.add_argument("--alternate", action="store_true",
                        help="the --shm settings take turns job by job (off, on, off, on, ...) instead of one after the other")
    parser.add_argument("--kill", action="store_true", help="also a dead-rank run per size (TCP)")
    parser.add_argument("--freeze", action="store_true",
                        help=f"also a frozen-rank run per size (TCP, SIGSTOP, TFRING_PEER_TIMEOUT_S={FREEZE_PEER_TIMEOUT_S:g})")
    parser.add_argument("--hosts", nargs="*", default=[], help="emulated hosts, HOSTSxRANKS, e.g. 2x1 2x2 2x4 4x2")
    parser.add_argument("--hosts-shm", choices=["on", "off"], default="on",
                        help="shared memory between the ranks of one emulated host (default on)")
    parser.add_argument("--hosts-name", default="hosts", help="results go to lab/results/scale_NAME.json")
    parser.add_argument("--rate-gbit", type=float, default=1.0, help="each emulated host's link (Gbit/s)")
    parser.add_argument("--big-bytes", type=int, nargs="*", default=[1 << 20, 16 << 20])
    parser.add_argument("--local-big", action="store_true", help="--big-bytes allreduces in one-host runs too")
    parser.add_argument("--name", default="local", help="one-host results go to lab/results/scale_NAME.json")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--store", action="store_true", help="only measure one store request's cost")
    parser.add_argument("--report", action="store_true", help="fit the model, draw the plots, write lab/records/scaling.md")
    args = parser.parse_args()
    if args.store:
        measure_store()
    if args.sizes:
        def progress(results):
            write(args.name, {"machine": machine(), "repeats": args.repeats, "control_plane": model.CONTROL_PLANE,
                              "results": results})

        progress(run_local(args, progress))
        measure_store()
    if args.hosts:
        try:
            results = run_hosts(args)
        finally:
            netns.cleanup(netns.LAB_PREFIX)
        write(args.hosts_name, {"machine": machine(), "repeats": args.repeats, "rate_gbit": args.rate_gbit,
                                "shm": args.hosts_shm,
                        "results": results})
    if args.report:
        from lab.scale import report

        report.main()


if __name__ == "__main__":
    main()
