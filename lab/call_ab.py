"""The fixed cost of an 8-byte allreduce from a `tf.function`, with less drift than a whole
benchmark: blocks of 200 calls alternate between an empty `tf.function` and the allreduce
in one job (a sync before each block), and the cost is the difference of the per-call
medians. `--other` runs another build's tree the same way, alternating launches.

    python lab/call_ab.py [--other /path/to/old/tree] [--pairs 4] [--blocks 20]

Prints one line per launch: per rank, the empty call, the allreduce call, their difference
(us). Use `chrt -f 10` for an A/B on a busy machine (say so when reporting).
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import bench_common

PER_BLOCK = 200


def worker(blocks):
    tf, hvd = bench_common.tf_rank()
    x = tf.ones([2], tf.float32)
    empty = tf.function(lambda t: t)
    allreduce = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum, name="call_ab"))
    for _ in range(300):
        empty(x)
        allreduce(x)
    times = {"empty": [], "allreduce": []}
    for _ in range(blocks):
        for name, f in (("empty", empty), ("allreduce", allreduce)):
            hvd.allreduce(tf.constant(0.0), name="call_ab.sync")
            for _ in range(PER_BLOCK):
                t = time.perf_counter()
                f(x)
                times[name].append(time.perf_counter() - t)
    e, a = (statistics.median(times[k]) * 1e6 for k in ("empty", "allreduce"))
    rows = hvd.allgather_object((hvd.rank(), e, a))
    if hvd.rank() == 0:
        print("RESULT " + "  ".join(f"rank {r}: empty {e:.1f} allreduce {a:.1f} cost {a - e:.1f}" for r, e, a in rows),
              flush=True)


def launch(root, blocks):
    env = dict(os.environ, PYTHONPATH=root, OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-m", "tfring.runner.launch", "-np", "2", sys.executable,
                           os.path.abspath(__file__), "--worker", "--blocks", str(blocks)],
                          env=env, cwd=root, capture_output=True, text=True, timeout=600, check=False)
    lines = [line for line in done.stdout.splitlines() if "RESULT " in line]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"launch in {root} failed:\n{done.stdout[-1500:]}{done.stderr[-1500:]}")
    return lines[0].split("RESULT ", 1)[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--other", help="root of another built tree, run alternately")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--blocks", type=int, default=20)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.blocks)
        return
    roots = [ROOT] + ([os.path.abspath(args.other)] if args.other else [])
    for pair in range(args.pairs):
        for root in roots if pair % 2 == 0 else roots[::-1]:
            print(f"{root}: {launch(root, args.blocks)}", flush=True)


if __name__ == "__main__":
    main()
