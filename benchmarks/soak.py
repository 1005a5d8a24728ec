"""Soak: many random collectives across ranks, every result checked against NumPy, resident
memory sampled. Not a CI test (it runs for minutes).

    python benchmarks/soak.py --np 3 --ops 100000 [--seed 1] [--json lab/results/soak.json]

Runs tests/workers/core_soak.py under the launcher and summarizes RSS growth per rank
between the first quarter and the end (warm-up excluded).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--np", type=int, default=3)
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json")
    args = parser.parse_args()
    every = max(args.ops // 20, 1)
    cmd = [sys.executable, "-m", "tfring.runner.launch", "-np", str(args.np), sys.executable,
           os.path.join(ROOT, "tests", "workers", "core_soak.py"), str(args.seed), str(args.ops), str(every)]
    t0 = time.time()
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT))
    elapsed = time.time() - t0
    out = proc.stdout + proc.stderr
    samples = {}
    for rank, op, kib in re.findall(r"rss rank=(\d+) op=(\d+) kib=(\d+)", out):
        samples.setdefault(int(rank), []).append((int(op), int(kib)))
    ok = proc.returncode == 0 and all(f"rank {r}: {args.ops} collectives OK" in out for r in range(args.np))
    summary = {"np": args.np, "ops": args.ops, "seed": args.seed, "seconds": round(elapsed, 1), "all_results_correct": ok,
               "rss_kib": {r: {"after_warmup": s[len(s) // 4][1], "end": s[-1][1],
                               "growth_kib": s[-1][1] - s[len(s) // 4][1]} for r, s in samples.items()}}
    print(json.dumps(summary, indent=1))
    if not ok:
        print(out[-5000:])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
