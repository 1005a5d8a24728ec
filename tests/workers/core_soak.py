"""Worker: a seeded random sequence of mixed collectives on NumPy arrays, each result checked
against a NumPy reference computed from every rank's (regenerated) input.

Usage: python core_soak.py SEED NUM_OPS [RSS_EVERY]
With RSS_EVERY, prints this process's resident memory every RSS_EVERY ops (soak benchmark).
Every rank draws the same op sequence from SEED; rank r's data for op i comes from
default_rng([SEED, i, r]), so any rank can rebuild every other rank's input.
"""

import sys

import ml_dtypes
import numpy as np

import tfring

DTYPES = [np.uint8, np.int8, np.int16, np.uint16, np.int32, np.int64, np.float16, ml_dtypes.bfloat16, np.float32,
          np.float64, np.bool_]
OPS = {"sum": tfring.Sum, "average": tfring.Average, "min": tfring.Min, "max": tfring.Max, "product": tfring.Product}


def data(seed, i, r, shape, dtype):
    rng = np.random.default_rng([seed, i, r])
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 4, shape).astype(dtype)
    return rng.uniform(-2, 2, shape).astype(np.float32).astype(dtype)


def reference_reduce(arrays, op, dtype, n):
    wide = [a.astype(np.float64) if dtype != np.bool_ else a for a in arrays]
    if dtype == np.bool_:
        combine = np.logical_or if op in ("sum", "max") else np.logical_and
        out = wide[0]
        for a in wide[1:]:
            out = combine(out, a)
        return out
    if op in ("sum", "average"):
        out = sum(wide)
        if op == "average":
            out = out / n
            if np.dtype(dtype).kind in "iu":
                out = np.trunc(out)
    elif op == "min":
        out = np.minimum.reduce(wide)
    elif op == "max":
        out = np.maximum.reduce(wide)
    else:
        out = np.prod(np.stack(wide), axis=0)
    return out


def check(got, want, dtype, what):
    if dtype == np.bool_ or np.dtype(dtype).kind in "iu":
        ok = np.array_equal(got.astype(np.float64) if dtype != np.bool_ else got, want.astype(got.dtype).astype(np.float64) if dtype != np.bool_ else want)
    else:
        tol = 3e-2 if dtype in (np.float16, ml_dtypes.bfloat16) else 1e-5
        ok = np.allclose(got.astype(np.float64), want, rtol=tol, atol=tol)
    if not ok:
        raise AssertionError(f"{what}: got {got!r} want {want!r}")


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def main():
    seed, num_ops = int(sys.argv[1]), int(sys.argv[2])
    rss_every = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    tfring.init()
    r, n = tfring.rank(), tfring.size()
    plan = np.random.default_rng(seed)
    for i in range(num_ops):
        if rss_every and i % rss_every == 0:
            print(f"rss rank={r} op={i} kib={rss_kib()}", flush=True)
        kind = plan.choice(["allreduce", "allgather", "broadcast", "alltoall", "reducescatter", "barrier"])
        dtype = DTYPES[plan.integers(len(DTYPES))]
        rows = int(plan.choice([0, 1, 2, 3, 5, 17, 1000]))
        cols = int(plan.choice([1, 3]))
        name = f"soak.{i}"
        what = f"op {i} {kind} {np.dtype(dtype).name} rows={rows} cols={cols}"
        if kind == "allreduce":
            op = plan.choice(list(OPS))
            if dtype == np.bool_ and op == "average":
                op = "sum"
            inputs = [data(seed, i, k, (rows, cols), dtype) for k in range(n)]
            got = tfring.allreduce(inputs[r], op=OPS[op], name=name)
            check(got, reference_reduce(inputs, op, dtype, n), dtype, what + " " + op)
        elif kind == "allgather":
            inputs = [data(seed, i, k, ((rows + k) % 4, cols), dtype) for k in range(n)]
            got = tfring.allgather(inputs[r], name=name)
            check(got, np.concatenate(inputs), dtype, what)
        elif kind == "broadcast":
            root = int(plan.integers(n))
            inputs = [data(seed, i, k, (rows, cols), dtype) for k in range(n)]
            got = tfring.broadcast(inputs[r], root_rank=root, name=name)
            check(got, inputs[root], dtype, what + f" root={root}")
        elif kind == "alltoall":
            splits = [[int(x) for x in np.random.default_rng([seed, i, k, 7]).integers(0, 3, n)] for k in range(n)]
            inputs = [data(seed, i, k, (sum(splits[k]), cols), dtype) for k in range(n)]
            got, got_splits = tfring.alltoall(inputs[r], splits=splits[r], name=name)
            pieces = []
            for k in range(n):
                start = sum(splits[k][:r])
                pieces.append(inputs[k][start:start + splits[k][r]])
            check(got, np.concatenate(pieces), dtype, what)
            assert list(got_splits) == [splits[k][r] for k in range(n)], what
        elif kind == "reducescatter":
            if dtype == np.bool_:
                continue
            inputs = [data(seed, i, k, (rows, cols), dtype) for k in range(n)]
            got = tfring.reducescatter(inputs[r], op=tfring.Sum, name=name)
            full = reference_reduce(inputs, "sum", dtype, n)
            start = sum(rows // n + (k < rows % n) for k in range(r))
            check(got, full[start:start + rows // n + (r < rows % n)], dtype, what)
        else:
            tfring.barrier(name=name)
    print(f"rank {r}: {num_ops} collectives OK", flush=True)
    tfring.shutdown()


if __name__ == "__main__":
    main()
