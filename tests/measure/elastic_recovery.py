"""Time from a worker's death to training resuming, in an elastic job at np=3.

    python tests/measure/elastic_recovery.py [--repeat 3]   # writes lab/results/elastic.json

Runs tests/workers/elastic_train.py (the script of tests/test_elastic.py) through
``tfringrun -np 3 --min-np 2`` on three loopback hosts; one worker SIGKILLs itself in
``model.fit`` (epoch 1, batch 3; a commit after every batch). From its ``T_KILL`` line to
each survivor's ``T_RESET`` (the job re-formed at np=2: error seen, last commit restored,
new generation published and joined) and ``T_RESUME`` (its first training step after the
reset ended: state synced from the new rank 0 and fit's train function traced again).
Reports median and range over runs and survivors, for the death of rank 1 and of rank 0.
"""

import argparse
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)

from tests.helpers import rank_output, run_launcher

WORKER = os.path.join(ROOT, "tests", "workers", "elastic_train.py")
HOSTS = "127.0.0.1:1,127.0.0.2:1,127.0.0.3:1"


def one_run(victim):
    cfg = {"mode": "fit", "epochs": 4, "commit_every": 1, "sleep_s": 0.02, "die_worker": victim,
           "die_epoch": 1, "die_batch": 3}
    with open(WORKER) as f:
        script = f.read()
    with tempfile.TemporaryDirectory() as tmp:
        result = run_launcher(["-np", "3", "--min-np", "2", "-H", HOSTS, "--discovery-interval-s", "0.2"], script,
                              timeout=300, script_args=(json.dumps(cfg), tmp))
    kill = float(re.search(r"T_KILL ([\d.]+)", rank_output(result.stdout, victim)).group(1))
    out = {}
    for w in ("w0", "w1", "w2"):
        if w == victim:
            continue
        text = rank_output(result.stdout, w)
        out[w] = {name: float(re.search(rf"T_{name.upper()} ([\d.]+)", text).group(1)) - kill
                  for name in ("reset", "resume")}
    return out


def summary(values):
    values = sorted(values)
    return {"median_s": round(statistics.median(values), 3), "min_s": round(values[0], 3),
            "max_s": round(values[-1], 3), "n": len(values)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=os.path.join(ROOT, "lab", "results", "elastic.json"))
    ns = parser.parse_args()
    rows = []
    for victim, label in (("w1", "rank 1 SIGKILLed mid-fit"), ("w0", "rank 0 SIGKILLed mid-fit")):
        resets, resumes = [], []
        for i in range(ns.repeat):
            for times in one_run(victim).values():
                resets.append(times["reset"])
                resumes.append(times["resume"])
            print(f"{label}: run {i + 1}/{ns.repeat} done", file=sys.stderr, flush=True)
        rows.append({"fault": label, "np": "3 -> 2", "to_reset": summary(resets), "to_resume": summary(resumes)})
    report = {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.node()} ({os.cpu_count()} CPUs)",
              "runs_per_row": ns.repeat, "rows": rows}
    with open(ns.out, "w") as f:
        json.dump(report, f, indent=1)
    print("| fault | np | to re-formed (reset): median (range) | to first step after it: median (range) |")
    print("|---|---|---|---|")
    for r in rows:
        a, b = r["to_reset"], r["to_resume"]
        print(f"| {r['fault']} | {r['np']} | {a['median_s']:.2f} s ({a['min_s']:.2f}-{a['max_s']:.2f}) | "
              f"{b['median_s']:.2f} s ({b['min_s']:.2f}-{b['max_s']:.2f}) |")


if __name__ == "__main__":
    main()
