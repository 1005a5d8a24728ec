"""What tfring's NCCL path costs on a real GPU, against NCCL called directly.

One process, one GPU (the lent machines have one; NCCL refuses two ranks on one GPU).
With one rank NCCL's allreduce is a device-to-device copy, so the numbers measure what
tfring adds per collective: submission, the coordinator's round, the NCCL launch on
tfring's stream and the completion poll. The baseline is the same ncclAllReduce through
CuPy's NCCL binding on a CuPy stream, synchronized after each call.

    TFRING_WITHOUT_TF=1 python setup.py build_ext --inplace
    python benchmarks/gpu_collectives.py --json lab/results/gpu_collectives_h200.json

Rows (float32 sum, in place, one array per call, median of >= 20 calls after warm-up):
  tfring_us   tfring.allreduce(buf, out=buf) on a DeviceBuffer, wall time per call;
  nccl_us     ncclAllReduce through CuPy + stream synchronize, wall time per call;
  fused       64 tensors of 4 KiB submitted asynchronously and waited for, against 64
              sequential calls (what fusion saves a gradient list).
  long        collectives that keep the GPU busy (64 MiB .. 4 GiB, prescale_factor=2: NCCL's
              one-rank kernel reads and writes every byte), and CuPy's `x *= 2` on the same
              bytes + synchronize for scale (a slower kernel on an H200: not a bound). Run two
              builds alternately with `--long-only` to compare their completion polls: each
              tree's own copy of this file, since it puts its checkout first on sys.path.
"""

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tfring
from tfring import _core

SIZES = [4, 4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20]


def _median_us(call, iters, warmup=5):
    for _ in range(warmup):
        call()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def _iters_for(nbytes):
    return 200 if nbytes <= 1 << 20 else 40 if nbytes <= 16 << 20 else 20


def tfring_rows():
    rows = []
    for nbytes in SIZES:
        buf = _core.DeviceBuffer.from_numpy(np.ones(nbytes // 4, np.float32), 0)
        name = f"gpu.bench.{nbytes}"
        def call(buf=buf, name=name):
            tfring.allreduce(buf, op=tfring.Sum, name=name, out=buf)

        rows.append({"bytes": nbytes, "tfring_us": _median_us(call, _iters_for(nbytes))})
    return rows


LONG_SIZES = [64 << 20, 256 << 20, 1 << 30, 4 << 30]


def long_rows():
    """tfring's premultiplied one-rank allreduce (a kernel over every byte) against CuPy's
    in-place scaling of the same bytes; medians of 20 calls."""
    rows = []
    for nbytes in LONG_SIZES:
        buf = _core.DeviceBuffer.from_numpy(np.ones(nbytes // 4, np.float32), 0)
        name = f"gpu.long.{nbytes}"

        def call(buf=buf, name=name):
            tfring.allreduce(buf, op=tfring.Sum, name=name, out=buf, prescale_factor=2.0)

        rows.append({"bytes": nbytes, "tfring_us": _median_us(call, 20, warmup=3)})
        del buf
    try:
        import cupy
    except ImportError:
        return rows
    for row in rows:
        x = cupy.ones(row["bytes"] // 4, dtype=cupy.float32)

        def scale(x=x):
            x *= 2.0
            cupy.cuda.runtime.deviceSynchronize()

        row["cupy_scale_us"] = _median_us(scale, 20, warmup=3)
        del x
    return rows


def _print_long(rows):
    for row in rows:
        cupy_us = f"{row['cupy_scale_us']:9.1f}" if "cupy_scale_us" in row else f"{'-':>9}"
        print(f"long {row['bytes']:>11} tfring {row['tfring_us']:9.1f} us  cupy x*=2 {cupy_us} us")


def nccl_rows():
    try:
        import cupy
        from cupy.cuda import nccl
    except ImportError as e:  # no CuPy (or no NCCL in it): tfring's numbers alone
        return {}, f"CuPy NCCL baseline unavailable: {e}"
    comm = nccl.NcclCommunicator.initAll([0])[0]
    stream = cupy.cuda.Stream(non_blocking=True)
    out = {}
    for nbytes in SIZES:
        x = cupy.ones(nbytes // 4, dtype=cupy.float32)

        def call(x=x):
            comm.allReduce(x.data.ptr, x.data.ptr, x.size, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream.ptr)
            stream.synchronize()

        out[nbytes] = _median_us(call, _iters_for(nbytes))
    return out, f"NCCL {nccl.get_version()} through CuPy {cupy.__version__}"


def fused_row(tensors=64, nbytes=4 << 10, rounds=30):
    bufs = [_core.DeviceBuffer.from_numpy(np.ones(nbytes // 4, np.float32), 0) for _ in range(tensors)]
    fused_before = tfring.stats()["fused_tensors"]

    def together():
        handles = [tfring.allreduce_async(b, op=tfring.Sum, name=f"gpu.fuse.{i}", out=b) for i, b in enumerate(bufs)]
        for h in handles:
            h.wait()

    def one_by_one():
        for i, b in enumerate(bufs):
            tfring.allreduce(b, op=tfring.Sum, name=f"gpu.fuse.{i}", out=b)

    return {"tensors": tensors, "bytes_each": nbytes,
            "async_batch_us": _median_us(together, rounds), "sequential_us": _median_us(one_by_one, rounds),
            "fused_tensors_counted": tfring.stats()["fused_tensors"] - fused_before}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--long-only", action="store_true", help="only the long collectives (see above)")
    args = parser.parse_args()
    tfring.init()
    info = _core.gpu_info()
    if not info["available"]:
        sys.exit(f"no usable GPU: {info['detail']}")
    if args.long_only:
        long = long_rows()
        tfring.shutdown()
        _print_long(long)
        return
    rows = tfring_rows()
    fused = fused_row()
    long = long_rows()
    tfring.shutdown()
    baseline, baseline_detail = nccl_rows()
    for row in rows:
        row["nccl_us"] = baseline.get(row["bytes"])
    result = {"benchmark": "gpu_collectives", "gpu_detail": info["detail"], "baseline": baseline_detail,
              "host": platform.node(), "python": platform.python_version(), "allreduce": rows, "fused": fused,
              "long": long}
    print(f"{'bytes':>11} {'tfring us':>10} {'nccl us':>10}")
    for row in rows:
        nccl_us = f"{row['nccl_us']:10.1f}" if row["nccl_us"] is not None else f"{'-':>10}"
        print(f"{row['bytes']:>11} {row['tfring_us']:10.1f} {nccl_us}")
    print(f"fused: {fused}")
    _print_long(long)
    print(baseline_detail)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
