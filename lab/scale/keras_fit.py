"""A Keras MLP ``fit`` across emulated hosts (issue 31): the selection table (hierarchical
allreduce across hosts) against the same job with every collective pinned to the flat
ring (``TFRING_ALGORITHM``), launches alternating in the same minutes, against the ratio
the link-bound model predicts. Needs root (network namespaces).

    python -m lab.scale.keras_fit --hosts 2x2 --rate-mbit 300 --launches 3

The job: ``tfringrun`` on HOSTS x RANKS emulated hosts (each host's link shaped with
``tbf`` both ways), benchmarks/keras_models.py's MLP (784-1024-1024-10, 1.86 M float32
parameters: S = 7.5 MB of gradients per step), ``hvd.DistributedOptimizer`` + the
broadcast callback, BATCH samples per rank and step, a warm-up ``fit`` and then CALLS
timed ``fit`` calls of STEPS steps; a launch's figure is the median of its calls (global
samples/s, rank 0's clock).

The model: a step is compute c plus the gradient allreduce, which (link-bound) moves
2(H-1)/H x S over each host's link with the hierarchical allreduce and 2(N-1)/N x S with
the flat ring (N = H x RANKS). Predicted speed ratio (hierarchical / flat):
(c + 2(N-1)/N x S/B) / (c + 2(H-1)/H x S/B), B the link's bytes/s; with c = 0 (the link
alone) 1.5 at 2 x 2. c is taken from ``--compute-launches`` launches on the same hosts
with the links unshaped (step time there; an upper bound on c, so the ratio predicted from
it is a lower bound on the model's). Writes ``lab/results/scale_NAME.json``.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

from lab.scale import jobs
from tools.hostlab import netns

HERE = os.path.dirname(os.path.abspath(__file__))
FLAT = "allreduce=ring,allgather=ring,broadcast=chain,reducescatter=ring"
VARIANTS = {"table": "auto", "flat": FLAT}
GRADIENT_BYTES = 4 * (784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 10 + 10)


def worker(args):
    """One rank: whole_fit.py's tfring worker (warm-up fit with the broadcast callback, then
    ``--calls`` timed fits; rank 0 prints the samples/s of each)."""
    sys.path.insert(0, os.path.join(jobs.ROOT, "benchmarks"))
    import whole_fit

    args.mode = "tfring"
    whole_fit.worker(args)


def tbf_drops(hosts):
    """Packets the hosts' tbf queues dropped so far (both directions, all hosts): a drop
    costs TCP a retransmission, after a timeout (>= 200 ms) where nothing follows it."""
    total = 0
    for name, veth in zip(hosts.names, hosts._veths):
        for words in ([netns.tool("tc"), "-s", "qdisc", "show", "dev", veth],
                      [netns.tool("tc"), "-s", "-n", name, "qdisc", "show", "dev", hosts.interface]):
            out = subprocess.run(words, capture_output=True, text=True, timeout=10, check=False).stdout
            total += sum(int(v) for v in re.findall(r"dropped (\d+)", out))
    return total


def launch(args, hosts, per_host, algorithm):
    np_ = len(hosts.names) * per_host
    cmd = [*jobs.LAUNCHER, "-np", str(np_), *hosts.launch_args(per_host), sys.executable, "-m",
           "lab.scale.keras_fit", "--worker", "--calls", str(args.calls), "--steps", str(args.steps),
           "--batch", str(args.batch)]
    env = dict(os.environ, PYTHONPATH=jobs.ROOT, TF_CPP_MIN_LOG_LEVEL="2", OMP_NUM_THREADS="1",
               TFRING_ALGORITHM=VARIANTS[algorithm], **dict(e.split("=", 1) for e in args.env))
    load = os.getloadavg()[0]
    drops = tbf_drops(hosts)
    out = subprocess.run(cmd, env=env, cwd=jobs.ROOT, capture_output=True, text=True, timeout=args.timeout,
                         check=False, start_new_session=True)
    found = re.search(r"CALLS ([\d. ]+)", out.stdout)
    if not found:
        raise SystemExit(f"{algorithm} launch failed (exit {out.returncode}):\n{out.stdout[-1500:]}{out.stderr[-1500:]}")
    rates = [float(v) for v in found.group(1).split()]
    return {"rates": rates, "median": statistics.median(rates), "load": load, "tbf_drops": tbf_drops(hosts) - drops}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="2x2", help="HOSTSxRANKS")
    parser.add_argument("--rate-mbit", type=float, default=300)
    parser.add_argument("--launches", type=int, default=3)
    parser.add_argument("--compute-launches", type=int, default=1)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--name", default="keras_fit")
    parser.add_argument("--env", nargs="+", default=[], metavar="NAME=VALUE",
                        help="set for every job, e.g. TFRING_SPIN_US=0 (emulated hosts share this machine's cores)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    netns.require()
    h, per_host = netns.parse_hosts(args.hosts)
    n = h * per_host
    runs = {name: [] for name in VARIANTS}
    compute = []
    with netns.NetnsHosts(h, prefix=netns.LAB_PREFIX) as hosts:
        for i in range(args.compute_launches):  # links unshaped: the step time is about compute
            compute.append(launch(args, hosts, per_host, "table"))
            print(f"unshaped run {i}: {compute[-1]['median']:.0f} samples/s; load {compute[-1]['load']:.1f}",
                  flush=True)
        hosts.shape(args.rate_mbit * 1e6)
        for i in range(args.launches):
            for name in VARIANTS:
                runs[name].append(launch(args, hosts, per_host, name))
                r = runs[name][-1]
                print(f"{args.hosts} {name} run {i}: {' '.join(f'{v:.0f}' for v in r['rates'])} samples/s; "
                      f"load {r['load']:.1f}; tbf drops {r['tbf_drops']}", flush=True)
    rate_bytes = args.rate_mbit * 1e6 / 8
    link_s = {"table": 2 * (h - 1) / h * GRADIENT_BYTES / rate_bytes,
              "flat": 2 * (n - 1) / n * GRADIENT_BYTES / rate_bytes}
    samples_per_step = args.batch * n
    c = statistics.median(samples_per_step / r["median"] for r in compute) if compute else 0.0
    predicted = {"link_alone": link_s["flat"] / link_s["table"],
                 "with_compute": (c + link_s["flat"]) / (c + link_s["table"])}
    medians = {name: statistics.median(r["median"] for r in rs) for name, rs in runs.items()}
    payload = {"measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "hosts": h, "ranks_per_host": per_host,
               "rate_bits": args.rate_mbit * 1e6, "batch": args.batch, "steps": args.steps, "calls": args.calls,
               "gradient_bytes": GRADIENT_BYTES, "env": args.env, "unshaped": compute, "runs": runs, "medians": medians,
               "compute_step_s": c, "link_step_s": link_s, "predicted_ratio": predicted,
               "measured_ratio": medians["table"] / medians["flat"]}
    path = os.path.join(jobs.ROOT, "lab", "results", f"scale_{args.name}.json")
    with open(path, "w") as f:
        json.dump(payload, f, indent=1)
    print(f"wrote {os.path.relpath(path, jobs.ROOT)}")
    for name, rs in runs.items():
        ms = [r["median"] for r in rs]
        print(f"{name}: median {medians[name]:.0f} samples/s ({min(ms):.0f}-{max(ms):.0f})")
    print(f"measured ratio {payload['measured_ratio']:.2f}; predicted: link alone {predicted['link_alone']:.2f}, "
          f"with compute c = {c * 1e3:.0f} ms/step {predicted['with_compute']:.2f}")
    return None


if __name__ == "__main__":
    main()
