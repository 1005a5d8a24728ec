"""Where the fixed cost of one small allreduce goes: an 8-byte float32 Sum from a
`tf.function`, above an empty `tf.function` timed in the same processes, split with the
core's own counters (tfring.stats(), docs/monitoring.md) into

  negotiation   enqueue on this rank -> this rank holds the coordinator's response
                (includes waiting for the other rank: see wait_for_slowest)
  queue         response held -> the collective starts
  execute       the collective's execution (the transfer included)
  outside       the rest of the call: TF's executor and the AsyncOpKernel's ComputeAsync
                up to the enqueue, and from the done callback back to Python

Per rank, as the mean over the timed calls (the core's counters are sums). `--runs`
separate jobs; their medians and ranges are printed.

    python benchmarks/call_breakdown.py [--np 2] [--runs 3] [--calls 3000]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench_common

PHASES = ("negotiation", "wait_for_slowest", "queue", "execute", "transfer", "outside")


def worker(args):
    tf, hvd = bench_common.tf_rank()
    import tfring

    x = tf.ones([2], tf.float32)
    empty = tf.function(lambda t: t)
    allreduce = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum, name="breakdown"))

    def timed(f):
        """Microseconds per call of ``f`` and the core's counters around the timed calls
        only (after the warm-up and the sync that starts every rank together)."""
        for _ in range(200):
            f(x)
        hvd.allreduce(tf.constant(0.0), name="breakdown.sync")
        before = tfring.stats()
        start = time.perf_counter()
        for _ in range(args.calls):
            f(x)
        us = (time.perf_counter() - start) / args.calls * 1e6
        return us, before, tfring.stats()

    empty_us, _, _ = timed(empty)
    call_us, before, after = timed(allreduce)
    tensors = after["tensors"] - before["tensors"]
    per = {name: (after[f"{name}_seconds"] - before[f"{name}_seconds"]) / tensors * 1e6
           for name in ("negotiation", "wait_for_slowest", "queue", "execute", "transfer")}
    cost = call_us - empty_us
    per["outside"] = cost - per["negotiation"] - per["queue"] - per["execute"]
    row = {"rank": hvd.rank(), "empty_us": empty_us, "call_us": call_us, "cost_us": cost, **per}
    rows = hvd.allgather_object(row)
    if hvd.rank() == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--json")
    args = parser.parse_args()
    if "TFRING_RANK" in os.environ:
        worker(args)
        return
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    runs = []
    with tempfile.TemporaryDirectory() as scratch:
        for run in range(args.runs):
            target = os.path.join(scratch, f"run{run}.json")
            subprocess.run([sys.executable, "-m", "tfring.runner.launch", "-np", str(args.np), sys.executable,
                            os.path.abspath(__file__), "--calls", str(args.calls), "--json", target],
                           env=env, check=True, timeout=600)
            with open(target) as f:
                runs.append(json.load(f))
    print(f"np={args.np}, {args.runs} jobs x {args.calls} calls: median (min-max) over jobs, us per call")
    for rank in range(len(runs[0])):
        print(f"rank {rank}:")
        for key in ("empty_us", "call_us", "cost_us", *PHASES):
            values = [next(r for r in run if r["rank"] == rank)[key] for run in runs]
            print(f"  {key:18s} {statistics.median(values):8.1f} ({min(values):.1f}-{max(values):.1f})")


if __name__ == "__main__":
    main()
