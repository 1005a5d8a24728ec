"""A slow link on the lab (issue 32): does a host whose link runs at a fraction of the
others' show up in what tfring reports?

    sudo .venv/bin/python -m benchmarks.scale.slow_link [--hosts 3 --ranks 2] [--rate-gbit 1]
        [--slow-fraction 0.1] [--elements 262144] [--ops 50] [--json docs/benchmarks/slow_link.json]

Two jobs of H hosts x R ranks (NumPy API, allreduces of ``--elements`` float32), every link
shaped to ``--rate-gbit``: one with equal links, one with the last host's link throttled
(``HostFaults.throttle``) to ``--slow-fraction`` of the rate. Per rank: seconds per
allreduce, and the ``tfring.stats()`` figures over the timed allreduces
(``wait_for_slowest_seconds``, ``negotiation_seconds``, ``transfer_seconds``).
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from benchmarks.scale.host_faults import HostFaults
from benchmarks.scale.netns import NetnsHosts, unavailable

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

WORKER = """
import json, socket, sys, time, numpy as np, tfring
tfring.init()
x = np.ones(int(sys.argv[1]), np.float32)
for _ in range(3):
    tfring.allreduce(x, name="warm")
before, t = tfring.stats(), time.time()
for _ in range(int(sys.argv[2])):
    tfring.allreduce(x, name="big")
after, elapsed = tfring.stats(), time.time() - t
keys = ("wait_for_slowest_seconds", "negotiation_seconds", "transfer_seconds")
print("STATS " + json.dumps({"rank": tfring.rank(), "host": socket.gethostname(),
                             "seconds_per_allreduce": elapsed / int(sys.argv[2]),
                             **{k: after[k] - before[k] for k in keys}}), flush=True)
"""


def one_job(args, slow):
    with NetnsHosts(args.hosts, prefix="tsl", rate_bits=args.rate_gbit * 1e9) as hosts, \
            tempfile.TemporaryDirectory(prefix="tfring-slow-") as tmp:
        faults = HostFaults(hosts)
        if slow:
            faults.throttle(args.hosts - 1, args.rate_gbit * 1e9 * args.slow_fraction)
        script = os.path.join(tmp, "worker.py")
        with open(script, "w") as f:
            f.write(WORKER)
        cmd = [sys.executable, "-m", "tfring.runner.launch", *hosts.launch_args(args.ranks, own_hostnames=True),
               sys.executable, script, str(args.elements), str(args.ops)]
        env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
        try:
            out = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
        finally:
            faults.stop_all()
        if out.returncode != 0:
            raise RuntimeError(f"job failed ({out.returncode}): {out.stderr[-2000:]}")
        rows = sorted((json.loads(m) for m in re.findall(r"STATS (.*)", out.stdout)), key=lambda r: r["rank"])
        return {"slow_host": hosts.names[-1] if slow else None, "ranks": rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--rate-gbit", type=float, default=1.0)
    parser.add_argument("--slow-fraction", type=float, default=0.1)
    parser.add_argument("--elements", type=int, default=262144)
    parser.add_argument("--ops", type=int, default=50)
    parser.add_argument("--json")
    args = parser.parse_args()
    why = unavailable()
    if why:
        sys.exit(f"slow link: {why}")
    report = {"date": time.strftime("%Y-%m-%d"), **vars(args), "json": None,
              "equal_links": one_job(args, slow=False), "one_slow_link": one_job(args, slow=True)}
    for name in ("equal_links", "one_slow_link"):
        print(name)
        for r in report[name]["ranks"]:
            print(f"  rank {r['rank']} ({r['host']}): {r['seconds_per_allreduce'] * 1e3:.1f} ms per allreduce, "
                  f"wait for slowest {r['wait_for_slowest_seconds']:.3f} s, negotiation "
                  f"{r['negotiation_seconds']:.3f} s, transfer {r['transfer_seconds']:.3f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
