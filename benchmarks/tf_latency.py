"""Allreduce latency seen from TensorFlow: one `hvd.allreduce` inside a `tf.function`,
float32 sum, 8 B .. 16 MiB, median of many calls (the op's full path: TF executor,
AsyncOpKernel, enqueue, negotiation, transfer, done callback).

Per size, in the same job, five functions, each called with no `.numpy()` (an eager call of
a `tf.function` on the CPU returns once its outputs exist; `.numpy()` would add a copy of
the result, 1.5 ms at 16 MiB here):

  empty              returns its argument: what a `tf.function` call costs by itself
  argument           allreduce of the argument, which Python still holds, so TF cannot
                     hand it over and the op allocates a fresh output (out of place)
  produce            t * s with s a run-time scalar (Grappler would fold t * 1.0 away)
  produced           allreduce(t * s): a temporary TF forwards to the op, reduced in place,
                     as gradients are
  numpy              the NumPy API on the same bytes into a preallocated output

The five are timed interleaved, in blocks of 10 calls each in turn, for --seconds per variant
in all, so that the VM's speed drifting within a job falls on all five alike. The
allreduce's own cost is `argument - empty` and `produced - produce`; the bus bandwidth
at 16 MiB is computed from those (bytes x 2(n-1)/n / time). `--runs` separate jobs give
medians and ranges.

    python benchmarks/tf_latency.py --np 2 [--runs 3]   # writes lab/results/tf_latency_np2.json
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
sys.path.insert(0, HERE)
import bench_common

SIZES = (8, 1024, 64 << 10, 1 << 20, 16 << 20)
VARIANTS = ("empty", "argument", "produce", "produced", "numpy")
BLOCK = 10  # calls of one variant in a row (interleaved timing)


def worker(args):
    import numpy as np
    tf, hvd = bench_common.tf_rank()
    import tfring

    one = tf.constant(1.0)
    functions = {
        "empty": tf.function(lambda t, s: t),
        "argument": tf.function(lambda t, s: hvd.allreduce(t, op=hvd.Sum, name="latency")),
        "produce": tf.function(lambda t, s: t * s),
        "produced": tf.function(lambda t, s: hvd.allreduce(t * s, op=hvd.Sum, name="latency")),
    }
    rows = []
    for nbytes in SIZES:
        x = tf.ones([nbytes // 4], tf.float32)
        host, out = np.ones(nbytes // 4, np.float32), np.empty(nbytes // 4, np.float32)
        calls = {name: (lambda f=f, x=x: f(x, one)) for name, f in functions.items()}
        calls["numpy"] = lambda host=host, out=out: tfring.allreduce(host, op=tfring.Sum, name="latency.np", out=out)
        times = _time_interleaved(hvd, [calls[v] for v in VARIANTS], args.seconds * len(VARIANTS))
        for variant, per_call in zip(VARIANTS, times):
            rows.append({"bytes": nbytes, "variant": variant, "calls": len(per_call),
                         "median_us": statistics.median(per_call) * 1e6})
    if hvd.rank() == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump({"np": hvd.size(), "results": rows}, f, indent=1)


def _time_interleaved(hvd, calls, seconds):
    """Per-call times of each of ``calls``, taken in alternating blocks of BLOCK calls, so
    that a drift of the machine's speed within the job (this VM's come and go in seconds)
    falls on every variant alike instead of on whichever ran in that second. Every rank makes
    the same calls in the same order (rank 0 picks the number of rounds from a calibration)."""
    import tensorflow as tf

    for call in calls:
        for _ in range(2 * BLOCK):
            call()
    calibration = time.perf_counter()
    for call in calls:
        for _ in range(BLOCK):
            call()
    per_round = time.perf_counter() - calibration
    rounds = int(hvd.broadcast(tf.constant(max(3, int(seconds / per_round))), 0, name="latency.rounds"))
    times = [[] for _ in calls]
    for _ in range(rounds):
        for call, record in zip(calls, times):
            for _ in range(BLOCK):
                t = time.perf_counter()
                call()
                record.append(time.perf_counter() - t)
    return times


def summarize(runs, n):
    """Per size and variant: the median over runs of each run's median, and its range; per
    size the allreduce's own cost (argument - empty, produced - produce) and, from it, the
    bus bandwidth."""
    table = {}
    for run in runs:
        for r in run["results"]:
            table.setdefault((r["bytes"], r["variant"]), []).append(r["median_us"])
    out = []
    for nbytes in SIZES:
        row = {"bytes": nbytes}
        for variant in VARIANTS:
            values = table[(nbytes, variant)]
            row[variant] = {"median_us": statistics.median(values), "min_us": min(values), "max_us": max(values)}
        for name, (minus, plus) in {"argument_net": ("empty", "argument"), "produced_net": ("produce", "produced")}.items():
            nets = [p - m for p, m in zip(table[(nbytes, plus)], table[(nbytes, minus)])]  # within each run
            row[name] = {"median_us": statistics.median(nets), "min_us": min(nets), "max_us": max(nets)}
        for name in ("argument_net", "produced_net", "numpy"):
            cost = row[name]["median_us"] if name != "numpy" else row["numpy"]["median_us"]
            row[name]["busbw_GBps"] = nbytes * 2 * (n - 1) / n / (cost * 1e-6) / 1e9 if cost > 0 and n > 1 else 0.0
        out.append(row)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3, help="separate jobs (default 3)")
    parser.add_argument("--seconds", type=float, default=1.0, help="per size and variant")
    parser.add_argument("--json")
    args = parser.parse_args()
    if "TFRING_RANK" in os.environ:
        worker(args)
        return
    out = args.json or os.path.join(ROOT, "lab", "results", f"tf_latency_np{args.np}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    runs = []
    with tempfile.TemporaryDirectory() as scratch:
        for run in range(args.runs):
            target = os.path.join(scratch, f"run{run}.json")
            print(f"--- run {run + 1}/{args.runs} ---", flush=True)
            subprocess.run([sys.executable, "-m", "tfring.runner.launch", "-np", str(args.np), sys.executable,
                            os.path.abspath(__file__), "--seconds", str(args.seconds), "--json", target],
                           env=env, check=True, timeout=900)
            with open(target) as f:
                runs.append(json.load(f))
    summary = summarize(runs, args.np)
    with open(out, "w") as f:
        json.dump({"np": args.np, "host": platform.node(), "date": time.strftime("%Y-%m-%d"), "runs": len(runs),
                   "summary": summary, "per_run": runs}, f, indent=1)
    for row in summary:
        cells = "  ".join(f"{v} {row[v]['median_us']:8.1f}" for v in VARIANTS)
        print(f"{row['bytes']:>9} B  {cells}  | allreduce alone: argument {row['argument_net']['median_us']:.1f} us, "
              f"produced {row['produced_net']['median_us']:.1f} us, numpy {row['numpy']['median_us']:.1f} us"
              + (f"; busbw {row['argument_net']['busbw_GBps']:.2f} / {row['produced_net']['busbw_GBps']:.2f} / "
                 f"{row['numpy']['busbw_GBps']:.2f} GB/s" if row["bytes"] >= 1 << 20 else ""), flush=True)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
