"""Flat against hierarchical collectives on emulated hosts (issue 31): allreduce, allgather,
broadcast and reduce-scatter of one size, each host's link shaped, the two algorithms alternating job by
job in the same minutes (``TFRING_ALGORITHM`` pins them); medians of ``--repeats`` jobs
against each operation's link-bound limit. Needs root (network namespaces).

    python -m lab.scale.algorithms --hosts 2x4 4x2 --rate-mbit 400 --repeats 3
    python -m lab.scale.algorithms --crossover --repeats 3   # one host, no root needed

Writes ``lab/results/scale_algorithms.json`` and prints a Markdown table.
``--crossover``: the ring against recursive doubling for small allreduces on one host
(2, 4, 8 ranks with shared memory, 8 over TCP; 8 B to 1 MiB; each job rank 0's median of
``--iters`` calls one after the other), to place TFRING_RECURSIVE_DOUBLING_BYTES; writes
``lab/results/scale_crossover.json``.
Limits (S the buffer, allgather: the output; rate: the link's bytes/s), what any algorithm
needs: allreduce 2(H-1)/H x S, allgather (H-1)/H x S (each host receives the others'
blocks), broadcast S (each host but the root's receives the buffer), reduce-scatter
(H-1)/H x S (each host sends what the others' ranks own of its partial sums).
"""

import argparse
import json
import os
import statistics
import time

from lab.scale import jobs
from tools.hostlab import netns

HIERARCHICAL = "allreduce=hierarchical,allgather=hierarchical,broadcast=hierarchical,reducescatter=hierarchical"
# What a job runs, by name (--variants): its environment. The first two are the default A/B.
VARIANTS = {
    "flat": {"TFRING_ALGORITHM": "allreduce=ring,allgather=ring,broadcast=chain,reducescatter=ring"},
    "hierarchical": {"TFRING_ALGORITHM": HIERARCHICAL},
    # the hierarchical allreduce with its three phases one after the other (no pipeline)
    "sequential": {"TFRING_ALGORITHM": HIERARCHICAL, "TFRING_HIERARCHICAL_BLOCK_BYTES": "0"},
    "blocks1m": {"TFRING_ALGORITHM": HIERARCHICAL, "TFRING_HIERARCHICAL_BLOCK_BYTES": str(1 << 20)},
    "blocks4m": {"TFRING_ALGORITHM": HIERARCHICAL, "TFRING_HIERARCHICAL_BLOCK_BYTES": str(4 << 20)},
    # small allreduces: flat recursive doubling, the hierarchical one, the ring
    "recursive_doubling": {"TFRING_ALGORITHM": "allreduce=recursive_doubling"},
    "hierarchical_doubling": {"TFRING_ALGORITHM": "allreduce=hierarchical_doubling"},
    "ring": {"TFRING_ALGORITHM": "allreduce=ring"},
    # the same without the spin before sleeping: emulated hosts share this machine's cores, but
    # each job sizes its spin by the ranks per (emulated) host against the CPUs it sees
    "recursive_doubling_nospin": {"TFRING_ALGORITHM": "allreduce=recursive_doubling", "TFRING_SPIN_US": "0"},
    "hierarchical_doubling_nospin": {"TFRING_ALGORITHM": "allreduce=hierarchical_doubling", "TFRING_SPIN_US": "0"},
}
PROBE = os.path.join(jobs.HERE, "algo_probe.py")


def limit_s(op, hosts, nbytes, rate_bytes):
    share = {"allreduce": 2 * (hosts - 1) / hosts, "allgather": (hosts - 1) / hosts, "broadcast": 1.0,
             "reducescatter": (hosts - 1) / hosts}[op]
    return share * nbytes / rate_bytes


def one_job(spec_hosts, per_host, hosts, algorithm, args):
    np_ = spec_hosts * per_host
    probe_args = ["--ops", *args.ops, "--bytes", args.bytes[0], "--iters", args.iters]
    if args.no_barrier:
        probe_args += ["--no-barrier", "--warmup", 20]
    job = jobs.launch(np_, probe_args, hosts=hosts, ranks_per_host=per_host, timeout_s=120 + 10 * np_, probe=PROBE,
                      env={**VARIANTS[algorithm], **dict(e.split("=", 1) for e in args.env)})
    ranks = job["ranks"]
    if len(ranks) != np_ or job["timed_out"]:
        raise RuntimeError(f"{spec_hosts}x{per_host} {algorithm}: {len(ranks)} rank files, exit {job['returncode']}: "
                           f"{job['stderr_tail'][-800:]}")
    # the slowest rank's median per operation
    return {"ops": {op: max(r["ops"][op][str(args.bytes[0])]["median_s"] for r in ranks) for op in args.ops},
            "loadavg_before": job["loadavg_before"], "t": job["t_launch"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", nargs="+", default=["2x4", "4x2"], help="HOSTSxRANKS")
    parser.add_argument("--rate-mbit", type=float, default=400)
    parser.add_argument("--bytes", type=int, nargs="+", default=None,
                        help="16 MiB; --crossover: 8 1024 65536 262144 1048576")
    parser.add_argument("--ops", nargs="+", default=["allreduce", "allgather", "broadcast", "reducescatter"])
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--name", default=None, help="results go to lab/results/scale_NAME.json")
    parser.add_argument("--crossover", action="store_true")
    parser.add_argument("--variants", nargs="+", default=["flat", "hierarchical"], choices=sorted(VARIANTS),
                        help="what the jobs run, alternating job by job (default: flat hierarchical)")
    parser.add_argument("--env", nargs="+", default=[], metavar="NAME=VALUE",
                        help="set for every job, e.g. TFRING_SPIN_US=0 (emulated hosts share this machine's cores)")
    parser.add_argument("--crossover-algorithms", nargs="+", default=["ring", "recursive_doubling"],
                        help="--crossover: the allreduce algorithms compared (TFRING_ALGORITHM=allreduce=...)")
    parser.add_argument("--no-barrier", action="store_true",
                        help="calls one after the other, 20 warm-up calls (small sizes' latency)")
    args = parser.parse_args()
    if args.crossover:
        args.bytes = args.bytes or [8, 1 << 10, 64 << 10, 256 << 10, 1 << 20]
        return crossover(args)
    args.bytes = args.bytes or [16 << 20]
    args.name = args.name or "algorithms"
    netns.require()
    rate_bytes = args.rate_mbit * 1e6 / 8
    results = []
    for spec in args.hosts:
        h, per_host = netns.parse_hosts(spec)
        runs = {name: [] for name in args.variants}
        with netns.NetnsHosts(h, prefix=netns.LAB_PREFIX, rate_bits=args.rate_mbit * 1e6) as hosts:
            for i in range(args.repeats):
                for name in args.variants:
                    run = one_job(h, per_host, hosts, name, args)
                    runs[name].append(run)
                    print(f"{spec} {name} run {i}: " + ", ".join(
                        f"{op} {t * 1e3:.3f} ms ({limit_s(op, h, args.bytes[0], rate_bytes) / t:.0%})"
                        for op, t in run["ops"].items()) + f"; load {run['loadavg_before'][0]:.1f}", flush=True)
        results.append({"hosts": h, "ranks_per_host": per_host, "runs": runs})
    payload = {"measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rate_bits": args.rate_mbit * 1e6,
               "bytes": args.bytes[0], "iters": args.iters, "repeats": args.repeats, "variants": args.variants,
               "variant_env": {name: VARIANTS[name] for name in args.variants}, "no_barrier": args.no_barrier,
               "env": args.env,
               "results": results}
    path = os.path.join(jobs.ROOT, "lab", "results", f"scale_{args.name}.json")
    with open(path, "w") as f:
        json.dump(payload, f, indent=1)
    print(f"wrote {os.path.relpath(path, jobs.ROOT)}\n")
    print(table(payload))


CROSSOVER = [(2, True), (4, True), (8, True), (8, False)]  # ranks, shared memory


def crossover(args):
    iters = max(args.iters, 60)
    runs = []
    for i in range(args.repeats):
        for np_, shm in CROSSOVER:
            for algorithm in args.crossover_algorithms:
                job = jobs.launch(np_, ["--ops", "allreduce", "--bytes", *args.bytes, "--iters", iters,
                                        "--warmup", 20, "--no-barrier"], shm=shm, timeout_s=120 + 10 * np_,
                                  probe=PROBE, env={"TFRING_ALGORITHM": f"allreduce={algorithm}"})
                r0 = [r for r in job["ranks"] if r["rank"] == 0]
                if len(job["ranks"]) != np_ or job["timed_out"]:
                    raise RuntimeError(f"{np_} ranks {algorithm}: exit {job['returncode']}: {job['stderr_tail'][-800:]}")
                row = {"np": np_, "shm": shm, "algorithm": algorithm, "loadavg_before": job["loadavg_before"],
                       "rank0_median_s": {b: v["median_s"] for b, v in r0[0]["ops"]["allreduce"].items()}}
                runs.append(row)
                print(f"run {i}: {np_} ranks {'shm' if shm else 'tcp'} {algorithm}: " + ", ".join(
                    f"{b} B {t * 1e6:.0f} us" for b, t in row["rank0_median_s"].items()) +
                    f"; load {row['loadavg_before'][0]:.1f}", flush=True)
    payload = {"measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "iters": iters,
               "repeats": args.repeats, "bytes": args.bytes, "algorithms": args.crossover_algorithms, "runs": runs}
    path = os.path.join(jobs.ROOT, "lab", "results", f"scale_{args.name or 'crossover'}.json")
    with open(path, "w") as f:
        json.dump(payload, f, indent=1)
    print(f"wrote {os.path.relpath(path, jobs.ROOT)}\n")
    print(crossover_table(payload))


def crossover_table(payload):
    """Markdown: per rank count and transport, per size: ring / recursive doubling, medians over jobs (ranges)."""
    def cell(values):
        us = sorted(v * 1e6 for v in values)
        fmt = (lambda v: f"{v / 1e3:.2f} ms") if us[-1] >= 1000 else (lambda v: f"{v:.0f} us")
        return f"{fmt(statistics.median(us))} ({fmt(us[0])}-{fmt(us[-1])})"
    sizes = [str(b) for b in payload["bytes"]]
    algorithms = payload.get("algorithms", ["ring", "recursive_doubling"])
    names = " / ".join(a.replace("_", " ") for a in algorithms)
    lines = ["| ranks | " + " | ".join(f"{b} B: {names}" for b in sizes) + " | load |",
             "|---" * (len(sizes) + 2) + "|"]
    for np_, shm in CROSSOVER:
        rows = [r for r in payload["runs"] if r["np"] == np_ and r["shm"] == shm]
        if not rows:
            continue
        cells = []
        for b in sizes:
            cells.append(" / ".join(cell([r["rank0_median_s"][b] for r in rows if r["algorithm"] == a])
                                    for a in algorithms))
        loads = [r["loadavg_before"][0] for r in rows]
        lines.append(f"| {np_}, {'shared memory' if shm else 'TCP only'} | " + " | ".join(cells) +
                     f" | {min(loads):.1f}-{max(loads):.1f} |")
    return "\n".join(lines)


def table(payload):
    """Markdown: per configuration and operation, flat and hierarchical (median, range, % of the limit)."""
    rate_bytes = payload["rate_bits"] / 8
    variants = payload.get("variants", ["flat", "hierarchical"])
    header = ("| hosts x ranks | operation | limit | " +
              " | ".join(f"{v}: median (range) | of the limit" for v in variants) + " | load |")
    lines = [header, "|---" * (4 + 2 * len(variants)) + "|"]
    for res in payload["results"]:
        h, per_host = res["hosts"], res["ranks_per_host"]
        loads = [r["loadavg_before"][0] for runs in res["runs"].values() for r in runs]
        for op in res["runs"][variants[0]][0]["ops"]:
            limit = limit_s(op, h, payload["bytes"], rate_bytes)
            cells = []
            digits = 0 if payload["bytes"] >= 1 << 20 else 3
            for name in variants:
                ts = [r["ops"][op] for r in res["runs"][name]]
                med = statistics.median(ts)
                cells += [f"{med * 1e3:.{digits}f} ms ({min(ts) * 1e3:.{digits}f}-{max(ts) * 1e3:.{digits}f})",
                          f"{limit / med:.0%}" if limit > 0 else "-"]
            lines.append(f"| {h} x {per_host} | {op} | {limit * 1e3:.0f} ms | " + " | ".join(cells) +
                         f" | {min(loads):.1f}-{max(loads):.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
