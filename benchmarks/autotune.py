"""Does the autotuner (TFRING_AUTOTUNE) find a setting as good as a grid search, on emulated
hosts whose links are shaped (tools/hostlab/netns.py)?

    sudo .venv/bin/python -m benchmarks.autotune [--hosts 2 --ranks 2] [--rate-gbit 1]
        [--slow-fraction 0] [--grid TFRING_FUSION_THRESHOLD,TFRING_CHUNK_BYTES]
        [--steps 60] [--repeats 1] [--confirm 0] [--json lab/results/autotune.json]

One case = H emulated hosts x R ranks, every link at --rate-gbit (with --slow-fraction > 0
the last host's link at that fraction of it). The job is a synthetic training step (NumPy
API): the allreduce of 24 gradients of 1 KiB to 1 MiB (float32, 6 MiB in all), as a small
model's backward pass would submit them. Score: the bytes allreduced per second over the
last --steps steps, timed by rank 0.

  * Grid: one job per point of the product of the --grid settings' candidate lists (the
    autotuner's own, control/tunables.cc), each set explicitly, the others at their defaults.
  * Autotuned: one job with TFRING_AUTOTUNE=1 (warm-up 1 sample, --steps-per-sample steps
    per sample, 10 by default as the product's TFRING_AUTOTUNE_STEPS_PER_SAMPLE) that runs
    until its search has ended, then the same --steps timed steps with the setting it chose. Its CSV log gives the trials and the step at
    which the best was fixed.

With --repeats R, R rounds each run every grid point and one autotuned job; every score is
then the median over the rounds. With --confirm C, C more rounds each run the grid's best
point (by its medians) and one autotuned job again: the highest of many noisy medians
overstates its point, and these fresh jobs give the ratio without that pick. Prints, per
case, the grid (best first), the defaults' point, the autotuned choice and its score as a
fraction of the grid's best. The autotuner searches more settings than the grid (all of
tunables.cc), so it may beat it; with one round both are single launches on a shared 2-core
machine, where scores move +-30% between runs (/work/shared/ARCHITECTURE.md): read the
ratio with that in mind.
"""

import argparse
import csv
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from tools.hostlab.host_faults import HostFaults
from tools.hostlab.netns import NetnsHosts, unavailable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The autotuner's candidates (cc/core/control/tunables.cc), for the grid.
CANDIDATES = {
    "TFRING_FUSION_THRESHOLD": [1 << 20, 4 << 20, 16 << 20, 64 << 20],
    "TFRING_CYCLE_TIME_MS": [0, 0.25, 1, 4],
    "TFRING_CONTROL_HOLD_US": [0, 200, 1000],
    "TFRING_RECURSIVE_DOUBLING_BYTES": [0, 16 << 10, 64 << 10, 256 << 10, 1 << 20],
    "TFRING_CHUNK_BYTES": [64 << 10, 256 << 10, 1 << 20],
    "TFRING_HIERARCHICAL_BLOCK_BYTES": [0, 512 << 10, 2 << 20, 8 << 20],
}
# Their defaults (cc/core/base/settings_table.h), to find the defaults' point in a grid.
DEFAULTS = {"TFRING_FUSION_THRESHOLD": 64 << 20, "TFRING_CYCLE_TIME_MS": 1, "TFRING_CONTROL_HOLD_US": 200,
            "TFRING_RECURSIVE_DOUBLING_BYTES": 64 << 10, "TFRING_CHUNK_BYTES": 256 << 10,
            "TFRING_HIERARCHICAL_BLOCK_BYTES": 2 << 20}
WARMUP_SAMPLES = 1

WORKER = """
import json, sys, time, numpy as np, tfring
tfring.init()
sizes = [256 << (i % 11) for i in range(24)]           # 1 KiB .. 256 KiB, repeated
sizes[-4:] = [1 << 18, 1 << 18, 1 << 18, 1 << 18]       # float32 elements: 1 MiB each
grads = [np.ones(n, np.float32) for n in sizes]
nbytes = sum(g.nbytes for g in grads)
def step(i):
    handles = [tfring.allreduce_async(g, name=f"g{k}", out=g) for k, g in enumerate(grads)]
    for h in handles:
        h.wait()
untimed, timed = int(sys.argv[1]), int(sys.argv[2])
for i in range(untimed):
    step(i)
t = time.time()
for i in range(timed):
    step(i)
elapsed = time.time() - t
if tfring.rank() == 0:
    print("SCORE " + json.dumps({"bytes_per_s": nbytes * timed / elapsed, "steps": timed,
                                 "step_ms": elapsed / timed * 1e3, "untimed": untimed}), flush=True)
"""


def one_job(hosts, args, env, untimed):
    with tempfile.TemporaryDirectory(prefix="tfring-autotune-") as tmp:
        script = os.path.join(tmp, "worker.py")
        with open(script, "w") as f:
            f.write(WORKER)
        cmd = [sys.executable, "-m", "tfring.runner.launch", *hosts.launch_args(args.ranks),
               sys.executable, script, str(untimed), str(args.steps)]
        full_env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1", **env)
        out = subprocess.run(cmd, env=full_env, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"job failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(re.search(r"SCORE (.*)", out.stdout).group(1))


def _autotuned_job(hosts, args):
    """One autotuned job: (its score, the rows of its CSV log, the untimed steps it ran)."""
    with tempfile.TemporaryDirectory(prefix="tfring-autotune-log-") as tmp:
        log = os.path.join(tmp, "autotune.csv")
        # One pass: the start, then per setting its other candidates, the top one again and
        # the best point again (coordinate_search.h).
        searched = [c for n, c in CANDIDATES.items() if n != "TFRING_HIERARCHICAL_BLOCK_BYTES" or args.hosts > 1]
        trials = 1 + sum(len(c) + 1 for c in searched)
        # Untimed steps: warm-up and every trial, one sample each, a settling step after each
        # switch (at most one per trial), then one step more.
        untimed = (WARMUP_SAMPLES + trials) * args.steps_per_sample + trials + 2
        env = {"TFRING_AUTOTUNE": "1", "TFRING_AUTOTUNE_LOG": log,
               "TFRING_AUTOTUNE_WARMUP_SAMPLES": str(WARMUP_SAMPLES),
               "TFRING_AUTOTUNE_STEPS_PER_SAMPLE": str(args.steps_per_sample),
               "TFRING_AUTOTUNE_MAX_SAMPLES": str(trials)}
        tuned = one_job(hosts, args, env, untimed=untimed)
        with open(log) as f:
            rows = list(csv.reader(f))
    assert rows[-1][0] == "best", f"the search did not end within {untimed} steps: {rows}"
    return tuned, rows, untimed


def _autotuned_round(hosts, args, label):
    tuned, rows, untimed = _autotuned_job(hosts, args)
    chosen = dict(zip(rows[0][1:-1], rows[-1][1:-1]))
    print(f"  {label} autotuned {chosen}: {tuned['bytes_per_s'] / 1e6:.1f} MB/s", flush=True)
    return {**tuned, "chosen": chosen, "trials": len(rows) - 2, "fixed_after_steps": untimed - 2, "log": rows}


def run_case(args):
    """The grid and the autotuned job, ``args.repeats`` rounds (each round runs every grid
    point and one autotuned job, so the machine's drift reaches all of them alike); scores
    are the medians over the rounds."""
    names = [g for g in args.grid.split(",") if g]
    points = [{n: str(v) for n, v in zip(names, values)}
              for values in itertools.product(*(CANDIDATES[n] for n in names))]
    scores = {i: [] for i in range(len(points))}
    tuned_runs, confirm, confirm_tuned = [], [], []
    with NetnsHosts(args.hosts, prefix="tsl", rate_bits=args.rate_gbit * 1e9) as hosts:
        faults = HostFaults(hosts)
        try:
            if args.slow_fraction > 0:
                faults.throttle(args.hosts - 1, args.rate_gbit * 1e9 * args.slow_fraction)
            for round_ in range(args.repeats):
                for i, point in enumerate(points):
                    scores[i].append(one_job(hosts, args, point, untimed=5))
                    print(f"  round {round_ + 1} grid {point}: {scores[i][-1]['bytes_per_s'] / 1e6:.1f} MB/s",
                          flush=True)
                tuned_runs.append(_autotuned_round(hosts, args, f"round {round_ + 1}"))
            if args.confirm:
                # The grid's best by its medians, timed again in fresh jobs beside autotuned ones:
                # picking the highest of many noisy medians favours a lucky point.
                best = max(range(len(points)), key=lambda i: statistics.median(r["bytes_per_s"] for r in scores[i]))
                for round_ in range(args.confirm):
                    confirm.append(one_job(hosts, args, points[best], untimed=5))
                    print(f"  confirm {round_ + 1} grid's best {points[best]}: "
                          f"{confirm[-1]['bytes_per_s'] / 1e6:.1f} MB/s", flush=True)
                    confirm_tuned.append(_autotuned_round(hosts, args, f"confirm {round_ + 1}"))
        finally:
            faults.stop_all()
    grid = [{"settings": point, "bytes_per_s": statistics.median(r["bytes_per_s"] for r in scores[i]),
             "step_ms": statistics.median(r["step_ms"] for r in scores[i]),
             "runs_bytes_per_s": [r["bytes_per_s"] for r in scores[i]]} for i, point in enumerate(points)]
    grid.sort(key=lambda g: -g["bytes_per_s"])
    median_tuned = statistics.median(t["bytes_per_s"] for t in tuned_runs)
    confirmed = {}
    if confirm:
        best_again = statistics.median(r["bytes_per_s"] for r in confirm)
        tuned_again = statistics.median(t["bytes_per_s"] for t in confirm_tuned)
        confirmed = {"confirm": {"grid_best_bytes_per_s": best_again, "runs_bytes_per_s": [r["bytes_per_s"] for r in confirm],
                                 "autotuned_bytes_per_s": tuned_again, "autotuned_runs": confirm_tuned,
                                 "ratio": tuned_again / best_again}}
    return {"grid": grid, **confirmed,
            "autotuned": {"bytes_per_s": median_tuned,
                          "step_ms": statistics.median(t["step_ms"] for t in tuned_runs),
                          "runs": tuned_runs,
                          # the last round's, for the summary line (every round's is in runs)
                          "chosen": tuned_runs[-1]["chosen"], "trials": tuned_runs[-1]["trials"],
                          "fixed_after_steps": tuned_runs[-1]["fixed_after_steps"]},
            "ratio_to_grid_best": median_tuned / grid[0]["bytes_per_s"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--rate-gbit", type=float, default=1.0)
    parser.add_argument("--slow-fraction", type=float, default=0.0)
    parser.add_argument("--grid", default="TFRING_FUSION_THRESHOLD,TFRING_CHUNK_BYTES")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--steps-per-sample", type=int, default=10,
                        help="the autotuned job's TFRING_AUTOTUNE_STEPS_PER_SAMPLE")
    parser.add_argument("--repeats", type=int, default=1,
                        help="rounds of the whole grid and the autotuned job; scores are medians")
    parser.add_argument("--confirm", type=int, default=0,
                        help="then this many rounds of one job at the grid's best point and one "
                             "autotuned job: the ratio without the grid's pick of its luckiest point")
    parser.add_argument("--json")
    args = parser.parse_args()
    why = unavailable()
    if why:
        sys.exit(f"autotune benchmark: {why}")
    print(f"{args.hosts} hosts x {args.ranks} ranks, links at {args.rate_gbit:g} Gbit/s"
          + (f", the last host's at {args.slow_fraction:g} of it" if args.slow_fraction else ""), flush=True)
    report = {"date": time.strftime("%Y-%m-%d"), **vars(args), **run_case(args)}
    best = report["grid"][0]
    tuned = report["autotuned"]
    print(f"grid best {best['settings']}: {best['bytes_per_s'] / 1e6:.1f} MB/s "
          f"({best['step_ms']:.1f} ms per step)")
    defaults = next((g for g in report["grid"]
                     if all(v == str(DEFAULTS[n]) for n, v in g["settings"].items())), None)
    if defaults is not None:
        report["defaults_to_grid_best"] = defaults["bytes_per_s"] / best["bytes_per_s"]
        print(f"grid at the defaults: {defaults['bytes_per_s'] / 1e6:.1f} MB/s, "
              f"{report['defaults_to_grid_best']:.2f} of the grid's best")
    print(f"autotuned ({tuned['trials']} trials, fixed after {tuned['fixed_after_steps']} steps) {tuned['chosen']}: "
          f"{tuned['bytes_per_s'] / 1e6:.1f} MB/s ({tuned['step_ms']:.1f} ms per step), "
          f"{report['ratio_to_grid_best']:.2f} of the grid's best")
    if "confirm" in report:
        c = report["confirm"]
        print(f"confirmed over {args.confirm} more rounds: the grid's best {c['grid_best_bytes_per_s'] / 1e6:.1f} MB/s, "
              f"autotuned {c['autotuned_bytes_per_s'] / 1e6:.1f} MB/s: {c['ratio']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
