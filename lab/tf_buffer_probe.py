"""One job's look at a 16 MiB allreduce per buffer kind: the wall time per call (median, mean,
slowest) and rank 0's minor page faults per call beside the core's own transfer and
shared-memory link seconds (tfring.stats()).

  tf       hvd.allreduce of a held tf.function argument (TF allocates the output per call)
  tf_fwd   the same of a tensor the function has just produced (the op works in place)
  np       the NumPy API into a preallocated output

    tfringrun -np 2 python lab/tf_buffer_probe.py
    GLIBC_TUNABLES=glibc.malloc.hugetlb=1 tfringrun -np 2 python lab/tf_buffer_probe.py

    TFRING_KEEP_FREED_MEMORY=0 tfringrun -np 2 python lab/tf_buffer_probe.py

Rank 0 prints one line per kind. Used for docs/benchmarks.md's "malloc on huge pages" and
"fresh memory on every call" findings: the median hides the stalls, the mean shows them.
"""

import os
import resource
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import bench_common

CALLS = 40
COUNT = 4 << 20  # float32: 16 MiB


def _numbers(stats, prefix=""):
    """The numeric leaves of tfring.stats(), as {"a.b.c": value}."""
    flat = {}
    for key, value in stats.items():
        if isinstance(value, dict):
            flat.update(_numbers(value, f"{prefix}{key}."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            flat[prefix + str(key)] = value
    return flat


def main():
    tf, hvd = bench_common.tf_rank()
    import tfring

    x = tf.ones([COUNT], tf.float32)
    host, out = np.ones(COUNT, np.float32), np.empty(COUNT, np.float32)
    held = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum, name="probe.held"))
    produced = tf.function(lambda t: hvd.allreduce(t + 0.0, op=hvd.Sum, name="probe.produced"))
    calls = {"tf": lambda: held(x), "tf_fwd": lambda: produced(x),
             "np": lambda: tfring.allreduce(host, op=tfring.Sum, name="probe.np", out=out)}
    for name, call in calls.items():
        for _ in range(5):
            call()
        hvd.broadcast(tf.constant(0), 0, name=f"probe.sync.{name}")
        before, times = _numbers(tfring.stats()), []
        faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(CALLS):
            start = time.perf_counter()
            call()
            times.append((time.perf_counter() - start) * 1e3)
        after = _numbers(tfring.stats())
        faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before) / CALLS
        per_call_ms = {k: (after[k] - before.get(k, 0)) / CALLS * 1e3 for k in after}
        link = next((k.rsplit(".", 1)[0] for k in after if k.startswith("links.") and k.endswith(".send_seconds")
                     and per_call_ms[k] > 0), None)
        if hvd.rank() == 0:
            print(f"{name:7s} wall ms median {statistics.median(times):.2f} mean {statistics.mean(times):.2f} "
                  f"slowest {max(times):.1f} faults/call {faults:.0f} | transfer ms mean {per_call_ms['transfer_seconds']:.2f}"
                  + (f" link send {per_call_ms[link + '.send_seconds']:.2f} recv "
                     f"{per_call_ms[link + '.recv_seconds']:.2f}" if link else ""), flush=True)


if __name__ == "__main__":
    main()
