"""What negotiation costs per training step, with the response cache and without it.

A "step" is K small float32 allreduces submitted together (the gradients of a model with K
variables; 161 is ResNet-50's count) and then waited for, through the NumPy API (no
TensorFlow in the way). The same steps run with TFRING_CACHE_CAPACITY=1024 (default) and 0
(cache off), each in its own tfringrun job, alternating. Reported per configuration:
median step time and the control-channel bytes each rank sends per step (tfring.stats():
control_bytes_sent; rank 0's are its responses to every other rank).

    python benchmarks/negotiation.py [--np 2] [--tensors 20 161] [--rounds 3]

Writes lab/results/negotiation_np<N>.json.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def worker(args):
    import numpy as np

    import tfring

    tfring.init()
    results = []
    for k in args.tensors:
        grads = [np.full(args.elements, i, np.float32) for i in range(k)]
        names = [f"model/layer_{i}/kernel_grad" for i in range(k)]

        def step(grads=grads, names=names):
            handles = [tfring.allreduce_async(g, op=tfring.Sum, name=n) for g, n in zip(grads, names)]
            return [h.wait(timeout=60) for h in handles]

        for _ in range(args.warmup):
            out = step()
        assert all(float(o[0]) == i * tfring.size() for i, o in enumerate(out)), "wrong result"
        before = tfring.stats()
        times = []
        for _ in range(args.steps):
            t = time.perf_counter()
            step()
            times.append(time.perf_counter() - t)
        after = tfring.stats()
        per_step = {key: (after[key] - before[key]) / args.steps for key in ("control_bytes_sent", "cached_tensors", "collectives")}
        sent = tfring.allgather(np.array([per_step["control_bytes_sent"]], np.float64), name=f"bytes.{k}")
        median = tfring.allreduce(np.array([statistics.median(times)]), op=tfring.Max, name=f"median.{k}")
        results.append({"tensors": k, "median_step_us": float(median[0]) * 1e6,
                        "control_bytes_per_step_by_rank": [float(b) for b in sent],
                        "cached_tensors_per_step": per_step["cached_tensors"],
                        "collectives_per_step": per_step["collectives"]})
    if tfring.rank() == 0:
        with open(args.out, "w") as f:
            json.dump(results, f)


def run_job(args, capacity):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1", TFRING_CACHE_CAPACITY=str(capacity))
    cmd = [sys.executable, "-m", "tfring.runner.launch", "-np", str(args.np), sys.executable,
           os.path.abspath(__file__), "--out", out, "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--elements", str(args.elements), "--tensors", *map(str, args.tensors)]
    subprocess.run(cmd, env=env, check=True, timeout=600)
    with open(out) as f:
        rows = json.load(f)
    os.unlink(out)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--tensors", type=int, nargs="+", default=[20, 161])
    parser.add_argument("--elements", type=int, default=16, help="float32 elements per tensor")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3, help="jobs per configuration, alternating")
    parser.add_argument("--out", help=argparse.SUPPRESS)  # worker: where rank 0 writes
    parser.add_argument("--json")
    args = parser.parse_args()
    if "TFRING_RANK" in os.environ:
        worker(args)
        return
    by_config = {"cache on (1024)": [], "cache off (0)": []}
    for _ in range(args.rounds):
        by_config["cache on (1024)"].append(run_job(args, 1024))
        by_config["cache off (0)"].append(run_job(args, 0))
    table = []
    for config, rounds in by_config.items():
        for i, k in enumerate(args.tensors):
            medians = [r[i]["median_step_us"] for r in rounds]
            bytes_by_rank = rounds[-1][i]["control_bytes_per_step_by_rank"]
            table.append({"config": config, "tensors": k, "median_step_us": statistics.median(medians),
                          "step_us_by_round": medians, "control_bytes_per_step_by_rank": bytes_by_rank,
                          "cached_tensors_per_step": rounds[-1][i]["cached_tensors_per_step"],
                          "collectives_per_step": rounds[-1][i]["collectives_per_step"]})
    print(f"np={args.np}, {args.elements} float32 per tensor, {args.steps} steps x {args.rounds} jobs")
    print(f"{'config':<16} {'tensors':>7} {'step us':>9} {'rank0 B/step':>13} {'rank1 B/step':>13} {'cached/step':>11} {'colls/step':>10}")
    for row in table:
        b = row["control_bytes_per_step_by_rank"]
        print(f"{row['config']:<16} {row['tensors']:>7} {row['median_step_us']:>9.0f} {b[0]:>13.0f} "
              f"{b[1] if len(b) > 1 else 0:>13.0f} {row['cached_tensors_per_step']:>11.0f} "
              f"{row['collectives_per_step']:>10.1f}")
    out = args.json or os.path.join(ROOT, "lab", "results", f"negotiation_np{args.np}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump({"np": args.np, "host": platform.node(), "elements": args.elements, "steps": args.steps,
                   "rounds": args.rounds, "results": table}, f, indent=1)


if __name__ == "__main__":
    main()
