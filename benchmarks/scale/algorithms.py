"""Flat against hierarchical collectives on emulated hosts (issue 31): allreduce, allgather,
broadcast and reduce-scatter of one size, each host's link shaped, the two algorithms alternating job by
job in the same minutes (``TFRING_ALGORITHM`` pins them); medians of ``--repeats`` jobs
against each operation's link-bound limit. Needs root (network namespaces).

    python -m benchmarks.scale.algorithms --hosts 2x4 4x2 --rate-mbit 400 --repeats 3

Writes ``docs/benchmarks/scale_algorithms.json`` and prints a Markdown table.
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

from benchmarks.scale import jobs, netns

ALGORITHMS = {
    "flat": "allreduce=ring,allgather=ring,broadcast=chain,reducescatter=ring",
    "hierarchical": "allreduce=hierarchical,allgather=hierarchical,broadcast=hierarchical,reducescatter=hierarchical",
}
PROBE = os.path.join(jobs.HERE, "algo_probe.py")


def limit_s(op, hosts, nbytes, rate_bytes):
    share = {"allreduce": 2 * (hosts - 1) / hosts, "allgather": (hosts - 1) / hosts, "broadcast": 1.0,
             "reducescatter": (hosts - 1) / hosts}[op]
    return share * nbytes / rate_bytes


def one_job(spec_hosts, per_host, hosts, algorithm, args):
    np_ = spec_hosts * per_host
    job = jobs.launch(np_, ["--ops", *args.ops, "--bytes", args.bytes, "--iters", args.iters], hosts=hosts,
                      ranks_per_host=per_host, timeout_s=120 + 10 * np_, probe=PROBE,
                      env={"TFRING_ALGORITHM": ALGORITHMS[algorithm]})
    ranks = job["ranks"]
    if len(ranks) != np_ or job["timed_out"]:
        raise RuntimeError(f"{spec_hosts}x{per_host} {algorithm}: {len(ranks)} rank files, exit {job['returncode']}: "
                           f"{job['stderr_tail'][-800:]}")
    # the slowest rank's median per operation
    return {"ops": {op: max(r["ops"][op]["median_s"] for r in ranks) for op in args.ops},
            "loadavg_before": job["loadavg_before"], "t": job["t_launch"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", nargs="+", default=["2x4", "4x2"], help="HOSTSxRANKS")
    parser.add_argument("--rate-mbit", type=float, default=400)
    parser.add_argument("--bytes", type=int, default=16 << 20)
    parser.add_argument("--ops", nargs="+", default=["allreduce", "allgather", "broadcast", "reducescatter"])
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--name", default="algorithms")
    args = parser.parse_args()
    why = netns.unavailable()
    if why:
        raise SystemExit(why)
    rate_bytes = args.rate_mbit * 1e6 / 8
    results = []
    for spec in args.hosts:
        h, per_host = (int(x) for x in spec.lower().split("x"))
        runs = {name: [] for name in ALGORITHMS}
        with netns.NetnsHosts(h, prefix=netns.LAB_PREFIX, rate_bits=args.rate_mbit * 1e6) as hosts:
            for i in range(args.repeats):
                for name in ALGORITHMS:
                    run = one_job(h, per_host, hosts, name, args)
                    runs[name].append(run)
                    print(f"{spec} {name} run {i}: " + ", ".join(
                        f"{op} {t * 1e3:.1f} ms ({limit_s(op, h, args.bytes, rate_bytes) / t:.0%})"
                        for op, t in run["ops"].items()) + f"; load {run['loadavg_before'][0]:.1f}", flush=True)
        results.append({"hosts": h, "ranks_per_host": per_host, "runs": runs})
    payload = {"measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rate_bits": args.rate_mbit * 1e6,
               "bytes": args.bytes, "iters": args.iters, "repeats": args.repeats, "results": results}
    path = os.path.join(jobs.ROOT, "docs", "benchmarks", f"scale_{args.name}.json")
    with open(path, "w") as f:
        json.dump(payload, f, indent=1)
    print(f"wrote {os.path.relpath(path, jobs.ROOT)}\n")
    print(table(payload))


def table(payload):
    """Markdown: per configuration and operation, flat and hierarchical (median, range, % of the limit)."""
    rate_bytes = payload["rate_bits"] / 8
    header = ("| hosts x ranks | operation | limit | flat: median (range) | of the limit "
              "| hierarchical: median (range) | of the limit | load |")
    lines = [header, "|---|---|---|---|---|---|---|---|"]
    for res in payload["results"]:
        h, per_host = res["hosts"], res["ranks_per_host"]
        loads = [r["loadavg_before"][0] for runs in res["runs"].values() for r in runs]
        for op in res["runs"]["flat"][0]["ops"]:
            limit = limit_s(op, h, payload["bytes"], rate_bytes)
            cells = []
            for name in ALGORITHMS:
                ts = [r["ops"][op] for r in res["runs"][name]]
                med = statistics.median(ts)
                cells += [f"{med * 1e3:.0f} ms ({min(ts) * 1e3:.0f}-{max(ts) * 1e3:.0f})", f"{limit / med:.0%}"]
            lines.append(f"| {h} x {per_host} | {op} | {limit * 1e3:.0f} ms | " + " | ".join(cells) +
                         f" | {min(loads):.1f}-{max(loads):.1f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
