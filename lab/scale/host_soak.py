"""Soak: an elastic job on emulated hosts through many random host-level faults (issue 32).
Not a CI test (it runs for minutes); tests/test_host_faults.py runs one fault of it.

    sudo .venv/bin/python -m lab.scale.host_soak --faults 10 [--hosts 3 --ranks 2]
        [--worker numpy|keras] [--kinds kill cut freeze] [--keep-listed] [--seed 1]
        [--minutes 15] [--json lab/results/host_faults.json]

The job: ``tfringrun --min-np 2 --max-np H*R --host-discovery-script`` over H emulated
hosts x R slots (tools/hostlab/netns.py, each host its own hostname), peer timeout 2 s,
a commit every 10 steps. Workers: ``numpy`` (default), the light tools/hostlab/elastic_numpy.py
(NumPy API: data-parallel least squares under ``tfring.elastic.run_fn``); ``keras``, an elastic
Keras ``fit`` (lab/scale/elastic_keras_worker.py): 6 TensorFlow processes of ~500 MB,
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
import statistics
import sys
import tempfile
import time

import numpy as np

from tools.hostlab.elastic_job import COMMIT_EVERY, NUMPY_WORKER, PEER_TIMEOUT_S, ElasticHostJob, fault_round
from tools.hostlab.host_faults import HostFaults
from tools.hostlab.netns import NetnsHosts, unavailable

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKERS = {"numpy": NUMPY_WORKER, "keras": os.path.join(ROOT, "lab", "scale", "elastic_keras_worker.py")}


def soak(args):
    rng = np.random.default_rng(args.seed)
    rounds, result = [], {}
    deadline = time.monotonic() + args.minutes * 60
    with NetnsHosts(args.hosts, prefix="tsl") as hosts, tempfile.TemporaryDirectory(prefix="tfring-soak-") as out:
        faults = HostFaults(hosts)
        try:
            with ElasticHostJob(faults, out, ranks_per_host=args.ranks, worker=WORKERS[args.worker],
                                patience=1 if args.worker == "numpy" else 4) as job:
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
                        help="numpy: tools/hostlab/elastic_numpy.py (light); keras: an elastic Keras fit "
                             "(lab/scale/elastic_keras_worker.py, TensorFlow in every worker)")
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
