"""Large-allreduce bus bandwidth per launch, tfring against Open MPI, launches alternating:
the distribution over launches, not one run's median (this VM has per-launch modes).

Each round starts one tfring job and one Open MPI job (np ranks, float32 sum of --bytes).
The tfring job measures, in the same processes:
  numpy      the NumPy API into a preallocated output (tfring.allreduce(x, out=y))
  tf         one hvd.allreduce of a tf.function's argument, minus an empty tf.function
             (the op's own cost; the output is allocated by TensorFlow per call)
(each as the median call, and as the mean call: what a loop of calls waits for, stalls included)
and reports its shared-memory links' send/receive seconds (tfring.stats()['links']). Before
each round, lab/core_to_core.cc measures the one-way cache-line latency between CPUs 0 and 1
(a VM's mode can be where its virtual CPUs sit on the host).
The Open MPI job is benchmarks/impl_mpi.py (Allreduce into a preallocated output).

Pass/fail per path against the large-allreduce target: the slowest tfring launch >= 0.9x
Open MPI's median launch and >= 0.8x tfring's own fastest launch.

    python benchmarks/bandwidth_modes.py --launches 12 [--np 2] [--bytes 16777216]
        [--variant ring --variant cma:TFRING_SHM_CMA=auto ...]   # alternating variants
    # writes lab/results/bandwidth_modes_np2.json
"""

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench_common

CALLS = 40


def _busbw(nbytes, n, seconds):
    return nbytes * 2 * (n - 1) / n / seconds / 1e9 if seconds > 0 else 0.0


def worker(args):
    """One tfring job: the NumPy and tf.function paths, medians of CALLS calls each."""
    import numpy as np
    tf, hvd = bench_common.tf_rank()
    import tfring

    n, count = hvd.size(), args.bytes // 4
    x = tf.ones([count], tf.float32)
    host, out = np.ones(count, np.float32), np.empty(count, np.float32)
    empty = tf.function(lambda t: t)
    reduce = tf.function(lambda t: hvd.allreduce(t, op=hvd.Sum, name="modes.tf"))
    calls = {"empty": lambda: empty(x), "tf": lambda: reduce(x),
             "numpy": lambda: tfring.allreduce(host, op=tfring.Sum, name="modes.np", out=out)}
    medians, means, max_call = {}, {}, {}
    for name, call in calls.items():
        for _ in range(5):
            call()
        hvd.broadcast(tf.constant(0), 0, name=f"modes.sync.{name}")
        times = []
        for _ in range(CALLS):
            t = time.perf_counter()
            call()
            times.append(time.perf_counter() - t)
        medians[name] = statistics.median(times)
        max_call[name] = max(times)
        means[name] = statistics.mean(times)
    links = [link for link in tfring.stats().get("links", {}).values() if link.get("shared_memory")]
    if hvd.rank() == 0:
        with open(args.json, "w") as f:
            json.dump({"numpy": _busbw(args.bytes, n, medians["numpy"]),
                       "tf": _busbw(args.bytes, n, medians["tf"] - medians["empty"]),
                       "numpy_mean": _busbw(args.bytes, n, means["numpy"]),
                       "tf_mean": _busbw(args.bytes, n, means["tf"] - means["empty"]),
                       "tf_slowest_call_ms": (max_call["tf"] - medians["empty"]) * 1e3,
                       "links": links}, f)


def _core_to_core_ns():
    """One-way cache-line latency between CPUs 0 and 1 (lab/core_to_core.cc, built into
    build/ on first use), or None without a compiler or a second CPU."""
    binary = os.path.join(ROOT, "build", "core_to_core")
    source = os.path.join(ROOT, "lab", "core_to_core.cc")
    if (os.cpu_count() or 1) < 2 or not shutil.which("g++"):
        return None
    if not os.path.exists(binary) or os.path.getmtime(binary) < os.path.getmtime(source):
        os.makedirs(os.path.dirname(binary), exist_ok=True)
        subprocess.run(["g++", "-O2", "-pthread", source, "-o", binary], check=True, timeout=120)
    return float(subprocess.run([binary, "0", "1"], check=True, capture_output=True, text=True, timeout=60).stdout)


def _launch(cmd, env):
    """Runs one job; its output is shown only when it fails."""
    proc = subprocess.run(cmd, check=False, env=env, timeout=600, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed with exit code {proc.returncode}:\n{proc.stdout[-4000:]}")


def _parse_variants(specs):
    """--variant NAME[:VAR=VALUE,VAR=VALUE] -> [(name, {VAR: VALUE})]; default one variant."""
    variants = []
    for spec in specs or ["default"]:
        name, _, settings = spec.partition(":")
        variants.append((name, dict(item.split("=", 1) for item in settings.split(",") if item)))
    return variants


def _tfring_round(args, env, target):
    _launch([sys.executable, "-m", "tfring.runner.launch", "-np", str(args.np), sys.executable,
             os.path.abspath(__file__), "--worker", "--bytes", str(args.bytes), "--json", target], env)
    with open(target) as f:
        return json.load(f)


def _mpi_round(args, env, mpirun, target):
    _launch([mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(args.np), sys.executable,
             os.path.join(HERE, "impl_mpi.py"), "--min-bytes", str(args.bytes), "--max-bytes", str(args.bytes),
             "--json", target], env)
    with open(target) as f:
        return json.load(f)["results"][0]["busbw_GBps"]


def _verdict(rows, mpi):
    """Per path: the distribution over launches and the target (slowest >= 0.9x Open MPI's
    median launch and >= 0.8x the fastest)."""
    verdict = {}
    for path in ("numpy", "tf", "numpy_mean", "tf_mean"):
        if any(path not in r for r in rows):
            continue
        values = [r[path] for r in rows]
        v = {"min": min(values), "median": statistics.median(values), "max": max(values),
             "vs_own_fastest": min(values) / max(values)}
        if mpi:
            v["vs_openmpi_median"] = min(values) / statistics.median(mpi)
        v["meets_target"] = v["vs_own_fastest"] >= 0.8 and v.get("vs_openmpi_median", 1.0) >= 0.9
        verdict[path] = v
    return verdict


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--launches", type=int, default=12, help="rounds; each runs every variant and Open MPI")
    parser.add_argument("--bytes", type=int, default=16 << 20)
    parser.add_argument("--variant", action="append",
                        help="NAME[:VAR=VALUE,...] settings of one tfring variant (repeat to alternate several)")
    parser.add_argument("--no-mpi", action="store_true", help="tfring only")
    parser.add_argument("--json", help="output (default lab/results/bandwidth_modes_np<N>.json)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2")
    variants = _parse_variants(args.variant)
    mpirun = None if args.no_mpi else shutil.which(
        "mpirun", path=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""))
    rows = {name: [] for name, _ in variants}
    mpi = []
    with tempfile.TemporaryDirectory() as scratch:
        for launch in range(args.launches):  # alternating: the machine's drift hits every variant
            for name, settings in variants:
                row = {"launch": launch + 1, "core_to_core_ns": _core_to_core_ns()}
                row.update(_tfring_round(args, dict(env, **settings), os.path.join(scratch, f"{name}.{launch}.json")))
                shm = row.get("links", [])
                print(f"launch {launch + 1:>2} {name:>12}: numpy {row['numpy']:5.2f}  tf {row['tf']:5.2f} GB/s "
                      f"(means: {row['numpy_mean']:5.2f} {row['tf_mean']:5.2f}; slowest tf call "
                      f"{row['tf_slowest_call_ms']:.0f} ms)  "
                      f"(shm send/recv s {sum(x.get('send_seconds', 0.0) for x in shm):.3f}/"
                      f"{sum(x.get('recv_seconds', 0.0) for x in shm):.3f}; core to core "
                      f"{row['core_to_core_ns'] or 0:.0f} ns)", flush=True)
                rows[name].append(row)
            if mpirun:
                mpi.append(_mpi_round(args, env, mpirun, os.path.join(scratch, f"mpi.{launch}.json")))
                print(f"launch {launch + 1:>2} {'Open MPI':>12}: {mpi[-1]:5.2f} GB/s", flush=True)
    verdicts = {name: _verdict(rows[name], mpi) for name, _ in variants}
    for name, verdict in verdicts.items():
        for path, v in verdict.items():
            print(f"{name:>12} {path:>6}: slowest {v['min']:.2f}, median {v['median']:.2f}, fastest {v['max']:.2f} "
                  f"GB/s; slowest/fastest {v['vs_own_fastest']:.2f}"
                  + (f", slowest/Open MPI median {v['vs_openmpi_median']:.2f}" if mpi else "")
                  + (" (target met)" if v["meets_target"] else " (target missed)"))
    if mpi:
        print(f"Open MPI: {min(mpi):.2f} .. {max(mpi):.2f} GB/s, median {statistics.median(mpi):.2f}")
    out = args.json or os.path.join(ROOT, "lab", "results", f"bandwidth_modes_np{args.np}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump({"np": args.np, "bytes": args.bytes, "host": platform.node(), "date": time.strftime("%Y-%m-%d %H:%M"),
                   "variants": {name: settings for name, settings in variants}, "launches": rows, "openmpi": mpi,
                   "verdict": verdicts}, f, indent=1)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
