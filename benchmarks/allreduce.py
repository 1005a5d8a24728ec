"""Allreduce latency and bus bandwidth, float32 sum, 8 B .. 64 MiB.

Under the launcher (tfring only):
    tfringrun -np 2 python benchmarks/allreduce.py [--json out.json]
Side by side, in one invocation (tfring, then Open MPI via mpi4py and PyTorch gloo when
installed), writing lab/results/allreduce_np<N>_<impl>.json:
    python benchmarks/allreduce.py --compare --np 2
See bench_common.py for the method; benchmarks/report.py turns the JSON into
docs/benchmarks.md tables and the busbw plot.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import bench_common


def run_tfring(args):
    import tfring

    tfring.init()
    n, rank = tfring.size(), tfring.rank()

    def make(nbytes):  # into a preallocated output, like impl_mpi.py's Allreduce(x, y)
        x = np.ones(max(nbytes // 4, 1), np.float32)
        y = np.empty_like(x)
        return lambda: tfring.allreduce(x, op=tfring.Sum, name=f"bench.{nbytes}", out=y)

    def agree(v):
        return int(tfring.broadcast(np.array([v], np.int64), 0, name="bench.iters")[0])

    settings = {k: v[0] for k, v in tfring.config().items() if k != "TFRING_SECRET"}
    bench_common.run_sizes(make, tfring.barrier, agree, n, rank, args, "tfring", {"settings": settings})
    tfring.shutdown()


def compare(args):
    out_dir = os.path.join(ROOT, "lab", "results")
    os.makedirs(out_dir, exist_ok=True)
    common = ["--min-bytes", str(args.min_bytes), "--max-bytes", str(args.max_bytes),
              "--min-iters", str(args.min_iters), "--target-seconds", str(args.target_seconds)]
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    jobs = [("tfring", [sys.executable, "-m", "tfring.runner.launch", "-np", str(args.np), sys.executable,
                        os.path.join(HERE, "allreduce.py")])]
    mpirun = shutil.which("mpirun", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    try:
        import mpi4py  # noqa: F401

        if mpirun:
            jobs.append(("openmpi", [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(args.np),
                                     sys.executable, os.path.join(HERE, "impl_mpi.py")]))
    except ImportError:
        print("mpi4py not installed: skipping Open MPI", flush=True)
    try:
        import torch.distributed  # noqa: F401

        jobs.append(("gloo", [sys.executable, os.path.join(HERE, "impl_gloo.py"), "--np", str(args.np)]))
    except ImportError:
        print("torch not installed: skipping PyTorch gloo", flush=True)
    collected = {name: [] for name, _ in jobs}
    with tempfile.TemporaryDirectory() as scratch:
        for run in range(args.runs):  # alternating, so the machine's drift hits every implementation
            for name, cmd in jobs:
                target = os.path.join(scratch, f"{name}.{run}.json")
                print(f"--- run {run + 1}/{args.runs}: {name} ---", flush=True)
                subprocess.run(cmd + common + ["--json", target], env=env, check=True, timeout=1800)
                with open(target) as f:
                    collected[name].append(json.load(f))
    merged = {name: bench_common.merge_runs(runs) for name, runs in collected.items()}
    for name, data in merged.items():
        with open(os.path.join(out_dir, f"allreduce_np{args.np}_{name}.json"), "w") as f:
            json.dump(data, f, indent=1)
    print(f"\nmedian of {args.runs} runs (range)")
    for i, row in enumerate(merged["tfring"]["results"]):
        cells = []
        for name, data in merged.items():
            r = data["results"][i]
            cells.append(f"{name} {r['median_us']:9.1f} us ({r['min_us']:.1f}-{r['max_us']:.1f}) "
                         f"{r['busbw_GBps']:6.2f} GB/s")
        print(f"{row['bytes']:>10} B  " + "  ".join(cells), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_common.add_size_args(parser)
    parser.add_argument("--compare", action="store_true", help="run tfring, Open MPI and gloo in turn")
    parser.add_argument("--np", type=int, default=2, help="ranks (with --compare)")
    parser.add_argument("--runs", type=int, default=3, help="alternating runs of every implementation (with --compare)")
    args = parser.parse_args()
    if args.compare and "TFRING_RANK" not in os.environ:
        compare(args)
    else:
        run_tfring(args)


if __name__ == "__main__":
    main()
