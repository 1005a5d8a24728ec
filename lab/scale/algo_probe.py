"""The scale lab's algorithm probe: one light rank (NumPy API) that times large host-memory
collectives and writes ``<out>/rank<R>.json``. Started by ``tfringrun`` (algorithms.py);
which algorithm runs is the job's ``TFRING_ALGORITHM``.

Per operation (allreduce: float32 of ``--bytes``; allgather: every rank contributes
``--bytes / size`` bytes, so the output is ``--bytes``; broadcast: ``--bytes`` from rank 0;
reducescatter: float32 of ``--bytes`` in, ``1/size`` of it out):
``--warmup`` calls, then ``--iters`` calls each after a barrier (``--no-barrier``: one after
the other, for small sizes' latency), every wait bounded. Several ``--bytes`` run one after
the other; results by operation and size.
"""

import argparse
import json
import os
import statistics
import time

import numpy as np

COLLECTIVE_TIMEOUT_S = 120


def time_op(tfring, op, nbytes, args):
    rank, size = tfring.rank(), tfring.size()
    n = max(nbytes // 4, 1)
    calls = {
        "allreduce": (np.ones(n, np.float32), lambda x, name: tfring.allreduce_async(x, op=tfring.Sum, name=name)),
        "allgather": (np.full(n // size, rank, np.float32), lambda x, name: tfring.allgather_async(x, name=name)),
        "broadcast": (np.full(n, rank, np.float32), lambda x, name: tfring.broadcast_async(x, 0, name=name)),
        "reducescatter": (np.ones(n, np.float32),
                          lambda x, name: tfring.reducescatter_async(x, op=tfring.Sum, name=name)),
    }
    x, call = calls[op]
    name = f"algo.{op}.{nbytes}"
    for _ in range(args.warmup):
        call(x, name).wait(timeout=COLLECTIVE_TIMEOUT_S)
    times = []
    for _ in range(args.iters):
        if not args.no_barrier:
            tfring.allreduce(np.zeros(1, np.float32), name=f"algo.barrier.{op}")
        t = time.perf_counter()
        out = call(x, name).wait(timeout=COLLECTIVE_TIMEOUT_S)
        times.append(time.perf_counter() - t)
    if op == "allreduce" and not np.all(out == size):
        raise SystemExit(f"rank {rank}: allreduce returned other values")
    if op == "broadcast" and not np.all(out == 0):
        raise SystemExit(f"rank {rank}: broadcast from rank 0 returned other values")
    if op == "reducescatter" and not np.all(out == size):
        raise SystemExit(f"rank {rank}: reducescatter returned other values")
    if op == "allgather" and not np.array_equal(out[:: max(n // size, 1)], np.arange(size, dtype=np.float32)):
        raise SystemExit(f"rank {rank}: allgather returned blocks out of place")
    return {"median_s": statistics.median(times), "times_s": times}


def main():
    parser = argparse.ArgumentParser(description="scale lab algorithm probe (started by tfringrun)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--ops", nargs="+", default=["allreduce", "allgather", "broadcast", "reducescatter"])
    parser.add_argument("--bytes", type=int, nargs="+", default=[16 << 20])
    parser.add_argument("--no-barrier", action="store_true")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--iters", type=int, default=5)
    args = parser.parse_args()
    import tfring

    tfring.init()
    rank, size = tfring.rank(), tfring.size()
    result = {"rank": rank, "size": size, "ops": {}}
    for nbytes in args.bytes:
        for op in args.ops:
            result["ops"].setdefault(op, {})[str(nbytes)] = time_op(tfring, op, nbytes, args)
    with open(os.path.join(args.out, f"rank{rank}.json.tmp"), "w") as f:
        json.dump(result, f)
    os.replace(os.path.join(args.out, f"rank{rank}.json.tmp"), os.path.join(args.out, f"rank{rank}.json"))
    tfring.shutdown()


if __name__ == "__main__":
    main()
