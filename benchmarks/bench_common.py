"""Shared timing loop for the allreduce benchmarks, so tfring, MPI and gloo are measured the
same way: warm-up, a barrier, an iteration count chosen by rank 0 (~target seconds, at least
min_iters) and broadcast, then the median of per-iteration wall times on rank 0.
busbw = bytes / time x 2(n-1)/n (the nccl-tests convention). Also the CPU time of this
process's threads (thread_cpu, cpu_delta), for the benchmarks and lab probes that say which
thread spent a step."""

import json
import os
import platform
import statistics
import time


def tf_rank():
    """Set-up of a rank that times TensorFlow: TF's C++ logs quiet, one intra-op and one
    inter-op thread (the ranks share this machine's few CPUs; the timings describe that
    set-up), tfring initialised. Imports TensorFlow, so call it in the worker, not at import.
    Returns (tf, hvd): the ``tensorflow`` and ``tfring.tensorflow`` modules."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import tfring.tensorflow as hvd

    hvd.init()
    return tf, hvd


def sizes(min_bytes, max_bytes):
    s = min_bytes
    while s <= max_bytes:
        yield s
        s *= 4 if s < 1 << 20 else 2


def measure(allreduce, barrier, agree_on_int, nbytes, min_iters, target_s):
    """allreduce(): one float32 sum of nbytes; agree_on_int(v): rank 0's v on every rank."""
    for _ in range(3):
        allreduce()
    barrier()
    t = time.perf_counter()
    allreduce()
    one = time.perf_counter() - t
    iters = agree_on_int(max(min_iters, int(target_s / max(one, 1e-6))))
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        allreduce()
        times.append(time.perf_counter() - t)
    return statistics.median(times), iters


def run_sizes(make_allreduce, barrier, agree_on_int, n, rank, args, implementation, extra=None):
    rows = []
    for nbytes in sizes(args.min_bytes, args.max_bytes):
        median, iters = measure(make_allreduce(nbytes), barrier, agree_on_int, nbytes, args.min_iters,
                                args.target_seconds)
        busbw = nbytes / median * 2 * (n - 1) / n / 1e9 if n > 1 else 0.0
        rows.append({"bytes": nbytes, "iters": iters, "median_us": median * 1e6, "busbw_GBps": busbw})
        if rank == 0:
            print(f"{implementation:>8} {nbytes:>10} B {iters:>6} it {median * 1e6:>10.1f} us  busbw {busbw:6.3f} GB/s",
                  flush=True)
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump({"implementation": implementation, "np": n, "host": platform.node(), **(extra or {}),
                       "results": rows}, f, indent=1)
    return rows


def add_size_args(parser):
    parser.add_argument("--min-bytes", type=int, default=8)
    parser.add_argument("--max-bytes", type=int, default=64 << 20)
    parser.add_argument("--min-iters", type=int, default=5)
    parser.add_argument("--target-seconds", type=float, default=0.3)
    parser.add_argument("--json", help="write results here (rank 0)")


def merge_runs(runs):
    """One result from several runs of ``run_sizes`` (their JSON dicts, same sizes): per
    size the median over runs of each run's median, the range of those medians, and the
    busbw of the median. Keeps every run's figures under ``run_medians_us``."""
    merged = dict(runs[0], runs=len(runs), date=time.strftime("%Y-%m-%d"))
    rows = []
    for i, first in enumerate(runs[0]["results"]):
        medians = [run["results"][i]["median_us"] for run in runs]
        median = statistics.median(medians)
        scale = first["busbw_GBps"] * first["median_us"]  # busbw x time is constant per size
        rows.append({"bytes": first["bytes"], "median_us": median, "min_us": min(medians), "max_us": max(medians),
                     "busbw_GBps": scale / median if median else 0.0,
                     "busbw_min_GBps": scale / max(medians) if max(medians) else 0.0,
                     "busbw_max_GBps": scale / min(medians) if min(medians) else 0.0,
                     "run_medians_us": medians})
    merged["results"] = rows
    return merged


def thread_cpu():
    """{tid: (name, cpu seconds)} of every thread of this process."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[tid] = (name, (int(fields[11]) + int(fields[12])) / tick)  # utime + stime
    return out


def cpu_delta(before, after):
    """Threads that used CPU between two thread_cpu() readings, busiest first: [name, s]."""
    used = [(name, cpu - before.get(tid, (name, 0.0))[1]) for tid, (name, cpu) in after.items()]
    return [[name, round(s, 3)] for name, s in sorted(used, key=lambda u: -u[1]) if s > 0]
