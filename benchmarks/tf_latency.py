"""Allreduce latency seen from TensorFlow: one `hvd.allreduce` inside a `tf.function`,
float32 sum, 8 B .. 16 MiB, median of many calls (the op's full path: TF executor,
AsyncOpKernel, enqueue, negotiation, transfer, done callback).

Three functions per size, in the same run: `empty` returns its input (the cost of a
`tf.function` call and `.numpy()` alone); `constant input` reduces the argument, which TF
cannot hand over, so the op allocates its output; `temporary input` reduces `t * 1`, a
temporary TF forwards to the op, which then reduces in place (what gradients are). The
16 MiB rows also give the bus bandwidth (bytes x 2(n-1)/n / time).

    python benchmarks/tf_latency.py --np 2     # starts tfringrun itself; writes
                                               # docs/benchmarks/tf_latency_np2.json
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SIZES = (8, 1024, 64 << 10, 1 << 20, 16 << 20)


def worker(args):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import tfring.tensorflow as hvd

    hvd.init()
    rows = []
    functions = {
        "empty": tf.function(lambda t: t),
        "constant input": tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum, name="latency")),
        "temporary input": tf.function(lambda t: hvd.allreduce(t * 1.0, op=hvd.Sum, name="latency")),
    }
    for nbytes in SIZES:
        x = tf.ones([nbytes // 4], tf.float32)
        for variant, step in functions.items():
            times = _time_calls(hvd, step, x, args.seconds)
            median = statistics.median(times)
            row = {"bytes": nbytes, "variant": variant, "calls": len(times), "median_us": median * 1e6,
                   "p90_us": sorted(times)[int(0.9 * len(times))] * 1e6}
            if variant != "empty" and hvd.size() > 1:
                row["busbw_gbps"] = nbytes * 2 * (hvd.size() - 1) / hvd.size() / median / 1e9
            rows.append(row)
            if hvd.rank() == 0:
                bw = f"  busbw {row['busbw_gbps']:6.2f} GB/s" if "busbw_gbps" in row and nbytes >= 1 << 20 else ""
                print(f"{nbytes:>9} B  {variant:<16} median {row['median_us']:9.1f} us  p90 {row['p90_us']:9.1f} us"
                      f"{bw} ({len(times)} calls)", flush=True)
    if hvd.rank() == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump({"np": hvd.size(), "host": platform.node(), "results": rows}, f, indent=1)


def _time_calls(hvd, step, x, seconds):
    """Per-call times of ``step(x).numpy()``; every rank makes the same number of calls
    (rank 0 picks it from a calibration)."""
    import tensorflow as tf

    for _ in range(20):
        step(x).numpy()
    calibration = time.perf_counter()
    for _ in range(20):
        step(x).numpy()
    per_call = (time.perf_counter() - calibration) / 20
    calls = int(hvd.broadcast(tf.constant(max(30, int(seconds / per_call))), 0, name="latency.calls"))
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        step(x).numpy()
        times.append(time.perf_counter() - t)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=2.0, help="per size")
    parser.add_argument("--json")
    args = parser.parse_args()
    if "TFRING_RANK" in os.environ:
        worker(args)
        return
    out = args.json or os.path.join(ROOT, "docs", "benchmarks", f"tf_latency_np{args.np}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    subprocess.run([sys.executable, "-m", "tfring.runner.launch", "-np", str(args.np), sys.executable,
                    os.path.abspath(__file__), "--seconds", str(args.seconds), "--json", out],
                   env=env, check=True, timeout=600)


if __name__ == "__main__":
    main()
