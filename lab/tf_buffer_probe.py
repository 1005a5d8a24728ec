"""One job's look at a 16 MiB allreduce per buffer kind: the wall time per call (median, mean,
slowest) and rank 0's minor page faults per call beside the core's own transfer and
shared-memory link seconds (tfring.stats()).

  tf         hvd.allreduce of a held tf.function argument (TF allocates the output per call)
  tf_fwd     the same of a tensor the function has just produced (the op works in place)
  np         the NumPy API into a preallocated output
  np_tfin    the NumPy API from the held tensor's own buffer (DLPack) into NumPy's output
  np_tfmem   ... and into one TF-allocated output, the same every call
  np_tf2out  ... and into two TF-allocated outputs in turn (as TF's own calls get them: the
             output of consecutive calls alternates between two addresses)
  collapse   not timed: madvise(MADV_COLLAPSE) of the held input and the two TF outputs

PROBE_ORDER=np,tf,... picks and orders them (default: all but collapse, in the order above).
Each line also gives rank 0's CPU milliseconds per call of its busiest threads.

    tfringrun -np 2 python lab/tf_buffer_probe.py
    GLIBC_TUNABLES=glibc.malloc.hugetlb=1 tfringrun -np 2 python lab/tf_buffer_probe.py

    TFRING_KEEP_FREED_MEMORY=0 tfringrun -np 2 python lab/tf_buffer_probe.py

Rank 0 prints one line per kind. Used for docs/benchmarks.md's "malloc on huge pages",
"fresh memory on every call" and "where the tf.function path's transfer time goes" findings:
the median hides the stalls, the mean shows them.
"""

import os
import resource
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, ROOT)
import bench_common

from tools.tf_buffers import tensor_address

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


def _view(tf, tensor):
    """A NumPy array over a CPU tensor's own buffer (`.numpy()` copies)."""
    import ctypes
    return np.ctypeslib.as_array((ctypes.c_float * COUNT).from_address(tensor_address(tf, tensor)))


def _collapse(view):
    import ctypes
    huge = 2 << 20
    begin = (view.ctypes.data + huge - 1) & ~(huge - 1)
    end = (view.ctypes.data + view.nbytes) & ~(huge - 1)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    if libc.madvise(begin, end - begin, 25):  # MADV_COLLAPSE
        print(f"MADV_COLLAPSE failed: errno {ctypes.get_errno()}", flush=True)


def main():
    tf, hvd = bench_common.tf_rank()
    import tfring

    x = tf.ones([COUNT], tf.float32)
    host, out = np.ones(COUNT, np.float32), np.empty(COUNT, np.float32)
    held = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum, name="probe.held"))
    produced = tf.function(lambda t: hvd.allreduce(t + 0.0, op=hvd.Sum, name="probe.produced"))
    # The NumPy API on TensorFlow's memory: x's own buffer as input, and an output tensor's
    # (kept alive here) as output. Slow like "tf": the memory; fast like "np": the TF path.
    y = tf.zeros([COUNT], tf.float32) + 0.0
    y2 = tf.zeros([COUNT], tf.float32) + 0.0
    x_view, y_view, y2_view = _view(tf, x), _view(tf, y), _view(tf, y2)
    flip = [y_view, y2_view]
    calls = {"tf": lambda: held(x), "tf_fwd": lambda: produced(x),
             "np": lambda: tfring.allreduce(host, op=tfring.Sum, name="probe.np", out=out),
             "np_tfmem": lambda: tfring.allreduce(x_view, op=tfring.Sum, name="probe.np_tfmem", out=y_view),
             "np_tfin": lambda: tfring.allreduce(x_view, op=tfring.Sum, name="probe.np_tfin", out=out),
             # two TF outputs in turn, as TF's own calls allocate them (two threads' arenas)
             "np_tf2out": lambda: tfring.allreduce(x_view, op=tfring.Sum, name="probe.np_tf2out",
                                                   out=flip.append(flip.pop(0)) or flip[0])}
    order = os.environ.get("PROBE_ORDER", ",".join(calls)).split(",")
    for name, call in ((n, calls.get(n)) for n in order):
        if name == "collapse":  # x, y and y2 onto 2 MiB pages (madvise MADV_COLLAPSE)
            for view in (x_view, y_view, y2_view):
                _collapse(view)
            continue
        for _ in range(5):
            call()
        hvd.broadcast(tf.constant(0), 0, name=f"probe.sync.{name}")
        before, times = _numbers(tfring.stats()), []
        cpu_before = bench_common.thread_cpu()
        faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(CALLS):
            start = time.perf_counter()
            call()
            times.append((time.perf_counter() - start) * 1e3)
        after = _numbers(tfring.stats())
        busy = bench_common.cpu_delta(cpu_before, bench_common.thread_cpu())[:4]
        faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before) / CALLS
        per_call_ms = {k: (after[k] - before.get(k, 0)) / CALLS * 1e3 for k in after}
        link = next((k.rsplit(".", 1)[0] for k in after if k.startswith("links.") and k.endswith(".send_seconds")
                     and per_call_ms[k] > 0), None)
        if hvd.rank() == 0:
            print(f"{name:7s} wall ms median {statistics.median(times):.2f} mean {statistics.mean(times):.2f} "
                  f"slowest {max(times):.1f} faults/call {faults:.0f} | transfer ms mean {per_call_ms['transfer_seconds']:.2f}"
                  + (f" link send {per_call_ms[link + '.send_seconds']:.2f} recv "
                     f"{per_call_ms[link + '.recv_seconds']:.2f}" if link else "")
                  + " | CPU ms/call by thread " + ", ".join(f"{k} {v / CALLS * 1e3:.2f}" for k, v in busy), flush=True)


if __name__ == "__main__":
    main()
