"""A slow link on the lab (issue 32): does a host whose link runs at a fraction of the
others' show up in what tfring reports?

    sudo .venv/bin/python -m lab.scale.slow_link [--hosts 3 --ranks 2] [--rate-gbit 1]
        [--slow-fraction 0.1] [--elements 262144] [--seconds 40] [--json lab/results/slow_link.json]

Two jobs of H hosts x R ranks (NumPy API, allreduces of ``--elements`` float32 for
``--seconds``), every link shaped to ``--rate-gbit``: one with equal links, one with the last
host's link throttled (``HostFaults.throttle``) to ``--slow-fraction`` of the rate. Per rank:
seconds per allreduce, the ``tfring.stats()`` figures over the timed allreduces
(``wait_for_slowest_seconds``, ``negotiation_seconds``, ``transfer_seconds``) and the rate each
link to another host delivered (bytes received / their flow seconds, ``stats()["links"]``);
from rank 0, when its stats first named a host on a slow link (``slow_link_host``, seconds
after the first allreduce), which ranks and by what ratio, and whether the warning was logged.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from tools.hostlab.host_faults import HostFaults
from tools.hostlab.netns import NetnsHosts, unavailable

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

WORKER = """
import json, socket, sys, time, numpy as np, tfring
tfring.init()
x = np.ones(int(sys.argv[1]), np.float32)
seconds = float(sys.argv[2])
start = time.time()
for _ in range(3):
    tfring.allreduce(x, name="warm")
before, t, ops, named = tfring.stats(), time.time(), 0, None
# Every rank runs the same number of allreduces: rank 0 decides when to stop.
while True:
    tfring.allreduce(x, name="big")
    ops += 1
    s = tfring.stats() if tfring.rank() == 0 else {}
    if named is None and s.get("slow_link_host"):
        named = {"after_s": round(time.time() - start, 2), "host": s["slow_link_host"],
                 "ranks": s["slow_link_ranks"], "ratio": round(s["slow_link_ratio"], 2)}
    go = np.array([1.0 if time.time() - t < seconds else 0.0], np.float32)
    if tfring.broadcast(go, 0, name="go")[0] == 0:
        break
after, elapsed = tfring.stats(), time.time() - t
keys = ("wait_for_slowest_seconds", "negotiation_seconds", "transfer_seconds")
rates = {}
for peer, link in after["links"].items():
    got = link["bytes_received"] - before["links"].get(peer, {}).get("bytes_received", 0)
    secs = link["recv_seconds"] - before["links"].get(peer, {}).get("recv_seconds", 0)
    if not link["shared_memory"] and got > 0 and int(peer) != tfring.rank():
        rates[f"from rank {peer}"] = round(got / max(secs, 1e-6) / 1e6, 1)
print("STATS " + json.dumps({"rank": tfring.rank(), "host": socket.gethostname(),
                             "seconds_per_allreduce": elapsed / ops, "allreduces": ops,
                             **{k: after[k] - before[k] for k in keys}, "link_mb_per_s": rates,
                             "named": named, "slow_link_warnings": after["slow_link_warnings"]}), flush=True)
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
               sys.executable, script, str(args.elements), str(args.seconds)]
        env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
        try:
            out = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
        finally:
            faults.stop_all()
        if out.returncode != 0:
            raise RuntimeError(f"job failed ({out.returncode}): {out.stderr[-2000:]}")
        rows = sorted((json.loads(m) for m in re.findall(r"STATS (.*)", out.stdout)), key=lambda r: r["rank"])
        warnings = [line for line in out.stderr.splitlines() if "is on a slow link" in line]
        return {"slow_host": hosts.names[-1] if slow else None, "ranks": rows, "warnings": warnings}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--rate-gbit", type=float, default=1.0)
    parser.add_argument("--slow-fraction", type=float, default=0.1)
    parser.add_argument("--elements", type=int, default=262144)
    parser.add_argument("--seconds", type=float, default=40.0)
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
                  f"{r['negotiation_seconds']:.3f} s, transfer {r['transfer_seconds']:.3f} s, links (MB/s) "
                  f"{r['link_mb_per_s']}")
        print(f"  rank 0 named: {report[name]['ranks'][0]['named']}; warnings: {report[name]['warnings']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
