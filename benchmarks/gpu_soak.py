"""Randomized soak of the NCCL path on one GPU, every result checked against NumPy.

Batches of 1-32 collectives (allreduce with every op and scale factors, allgather,
broadcast, alltoall, reducescatter), random dtypes and shapes from empty to 16 MiB,
submitted asynchronously so the coordinator fuses them, then waited for and compared.
With one rank every collective is the identity (times the scale factors), so any byte out
of place (fusion offsets, stream ordering, buffer reuse) shows. Also times what a user
waits for around the collectives: init, the first GPU collective (it creates the NCCL
communicator), shutdown, over several init/shutdown cycles in one process.

    python benchmarks/gpu_soak.py --seconds 60 --json out.json
Under compute-sanitizer (memcheck), shorter and smaller:
    compute-sanitizer --tool memcheck python benchmarks/gpu_soak.py --seconds 20 --max-elements 65536
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tfring
from tfring import _core

DTYPES = [np.float32, np.float16, np.float64, np.int32, np.int64, np.uint8]
REDUCE_OPS = [tfring.Sum, tfring.Average, tfring.Max, tfring.Min]


def _array(rng, dtype, max_elements):
    rows = int(rng.integers(0, 8)) if rng.random() < 0.1 else int(rng.integers(1, 64))
    cols = max(1, int(rng.integers(1, max(2, max_elements // max(rows, 1)))))
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 100, (rows, cols)).astype(dtype)
    return rng.uniform(-4, 4, (rows, cols)).astype(dtype)


def _submit(rng, i, x):
    """One random collective on x; returns (handle, expected, kind)."""
    gpu = _core.DeviceBuffer.from_numpy(x, 0)
    name = f"soak.{i}"
    kind = rng.choice(["allreduce", "allreduce", "allreduce", "allgather", "broadcast", "alltoall", "reducescatter"])
    if kind == "allreduce":
        op = REDUCE_OPS[int(rng.integers(len(REDUCE_OPS)))]
        scaled = x.dtype.kind == "f" and op in (tfring.Sum, tfring.Average) and rng.random() < 0.3
        pre, post = (0.5, 4.0) if scaled else (1.0, 1.0)
        expected = (x.astype(np.float64) * pre * post).astype(x.dtype) if scaled else x
        kind = f"allreduce op={int(op)}" + (" scaled" if scaled else "")
        return tfring.allreduce_async(gpu, op=op, name=name, prescale_factor=pre, postscale_factor=post), expected, kind
    if kind == "allgather":
        return tfring.allgather_async(gpu, name=name), x, kind
    if kind == "broadcast":
        return tfring.broadcast_async(gpu, 0, name=name), x, kind
    if kind == "alltoall":
        return tfring.alltoall_async(gpu, splits=[x.shape[0]], name=name), x, kind
    return tfring.reducescatter_async(gpu, op=tfring.Sum, name=name), x, kind


def _result(out):
    if isinstance(out, tuple):  # alltoall: (output, received splits)
        out = out[0]
    return out.to_numpy() if isinstance(out, _core.DeviceBuffer) else np.asarray(out)


def soak(seconds, max_elements, seed):
    rng = np.random.default_rng(seed)
    fused_before = tfring.stats()["fused_tensors"]
    batches = tensors = nbytes = 0
    failures = []
    i = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        batch = []
        for _ in range(int(rng.integers(1, 33))):
            x = _array(rng, DTYPES[int(rng.integers(len(DTYPES)))], max_elements)
            batch.append(_submit(rng, i, x))
            i += 1
            nbytes += x.nbytes
        for handle, expected, kind in batch:
            got = _result(handle.wait())
            tol = 1e-2 if expected.dtype == np.float16 else 1e-6
            ok = got.shape == expected.shape and (np.array_equal(got, expected) if expected.dtype.kind != "f"
                                                  else np.allclose(got, expected, rtol=tol, atol=tol))
            if not ok and len(failures) < 10:
                detail = f"shape {got.shape}"
                if got.shape == expected.shape:
                    bad = np.flatnonzero(~np.isclose(got, expected, rtol=tol, atol=tol)) if expected.dtype.kind == "f" \
                        else np.flatnonzero(got != expected)
                    detail = (f"{bad.size} of {got.size} elements wrong, first at {bad[0]}: "
                              f"{got.flat[bad[0]]} != {expected.flat[bad[0]]}")
                failures.append(f"{kind} {expected.dtype} {expected.shape}: {detail}")
        batches += 1
        tensors += len(batch)
    return {"seconds": seconds, "batches": batches, "tensors": tensors, "bytes": nbytes,
            "fused_tensors": tfring.stats()["fused_tensors"] - fused_before, "failures": failures}


def lifecycle(cycles):
    rows = []
    for _ in range(cycles):
        t0 = time.perf_counter()
        tfring.init()
        t1 = time.perf_counter()
        x = _core.DeviceBuffer.from_numpy(np.ones(1024, np.float32), 0)
        tfring.allreduce(x, op=tfring.Sum, name="first", out=x)
        t2 = time.perf_counter()
        tfring.allreduce(x, op=tfring.Sum, name="second", out=x)
        t3 = time.perf_counter()
        tfring.shutdown()
        t4 = time.perf_counter()
        rows.append({"init_s": t1 - t0, "first_gpu_collective_s": t2 - t1, "second_s": t3 - t2, "shutdown_s": t4 - t3})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--max-elements", type=int, default=4 << 20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cycles", type=int, default=3, help="init/shutdown cycles timed")
    parser.add_argument("--json")
    args = parser.parse_args()
    cycles = lifecycle(args.cycles) if args.cycles else []
    for row in cycles:
        print("lifecycle", {k: round(v, 4) for k, v in row.items()}, flush=True)
    tfring.init()
    result = soak(args.seconds, args.max_elements, args.seed)
    tfring.shutdown()
    result["lifecycle"] = cycles
    print(json.dumps({k: v for k, v in result.items() if k != "lifecycle"}), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    if result["failures"]:
        sys.exit("soak: wrong results: " + "; ".join(result["failures"]))


if __name__ == "__main__":
    main()
