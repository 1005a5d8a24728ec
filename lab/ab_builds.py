"""This checkout against another build of tfring, alternating, on what np=2 users see.

The "no regression at np=2" check of a refactor: build the old commit in a worktree, then

    git worktree add --detach /tmp/old <commit>
    (cd /tmp/old && python setup.py build_ext --inplace)
    python lab/ab_builds.py --other /tmp/old --rounds 8 --json lab/results/ab.json

Each round runs, for each build in turn (the order alternates every round, so drift in the
machine's speed falls on both alike): `benchmarks/allreduce.py` under `tfringrun -np 2`
(8-byte latency and 16 MiB bus bandwidth, float32 sum) and one launch of
`benchmarks/whole_fit.py`'s tfring configuration (a whole Keras `fit` of the MLP, np=2,
median samples/s of its timed calls). Each build runs its own copies of those scripts. The
summary is the median over rounds per build and the new/old ratio.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def allreduce(root, timeout):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        cmd = [sys.executable, "-m", "tfring.runner.launch", "-np", "2", sys.executable,
               os.path.join(root, "benchmarks", "allreduce.py"), "--json", out, "--max-bytes", str(16 << 20),
               "--target-seconds", "0.5"]
        env = dict(os.environ, PYTHONPATH=root, OMP_NUM_THREADS="1")
        done = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise SystemExit(f"allreduce in {root} failed:\n{done.stdout[-1500:]}{done.stderr[-1500:]}")
        with open(out) as f:
            rows = {r["bytes"]: r for r in json.load(f)["results"]}
    return {"latency_8b_us": rows[8]["median_us"], "busbw_16mib_gbs": rows[16 << 20]["busbw_GBps"]}


def whole_fit(root, timeout):
    cmd = [sys.executable, os.path.join(root, "benchmarks", "whole_fit.py"), "--worker", "tfring", "--calls", "5",
           "--steps", "40", "--batch", "128"]
    env = dict(os.environ, PYTHONPATH=root, TF_CPP_MIN_LOG_LEVEL="2", OMP_NUM_THREADS="1")
    launcher = [sys.executable, "-m", "tfring.runner.launch", "-np", "2"]
    done = subprocess.run(launcher + cmd, env=env, cwd=root, capture_output=True, text=True, timeout=timeout,
                          check=False)
    found = re.search(r"CALLS ([\d ]+)", done.stdout)
    if not found:
        raise SystemExit(f"whole fit in {root} failed:\n{done.stdout[-1500:]}{done.stderr[-1500:]}")
    return {"fit_samples_per_s": statistics.median(float(v) for v in found.group(1).split())}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--other", required=True, help="root of the other build (a built worktree)")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--json")
    args = parser.parse_args()
    builds = {"new": ROOT, "old": os.path.abspath(args.other)}
    runs = {name: [] for name in builds}
    for i in range(args.rounds):
        order = list(builds) if i % 2 == 0 else list(reversed(builds))
        for name in order:
            row = {**allreduce(builds[name], args.timeout), **whole_fit(builds[name], args.timeout)}
            runs[name].append(row)
            print(f"round {i + 1} {name}: " + ", ".join(f"{k} {v:.2f}" for k, v in row.items()), flush=True)
    summary = {name: {k: statistics.median(r[k] for r in rows) for k in rows[0]} for name, rows in runs.items()}
    for key in summary["new"]:
        print(f"{key}: new {summary['new'][key]:.2f}, old {summary['old'][key]:.2f}, "
              f"new/old {summary['new'][key] / summary['old'][key]:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"builds": builds, "rounds": runs, "medians": summary}, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
