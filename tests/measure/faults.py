"""Time to a clean error for each fault of the fault matrix, measured many times.

    python tests/measure/faults.py [--repeat 5]    # writes lab/results/faults.json

Runs the very scripts of tests/test_faults.py and tests/test_faults_keras.py through the
launcher. For each run: the delay from the fault (the victim's "T0" line, printed just
before it kills itself or raises) to each survivor's error ("ERR" line), and to the
launcher's exit. Reports median and maximum over runs and survivors.
"""

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)

from tests import test_faults, test_faults_frozen, test_faults_keras, test_host_faults
from tests.helpers import rank_output, run_job
from tools.hostlab.netns import NetnsHosts, tool
from tools.hostlab.netns import unavailable as _netns_unavailable

SCENARIOS = [
    # name, np, script, stage argument, victim, extra script arg (a directory) needed
    ("SIGKILL during negotiation", 2, test_faults.DURING_NEGOTIATION, "negotiation", 1, False),
    ("SIGKILL during negotiation", 3, test_faults.DURING_NEGOTIATION, "negotiation", 1, False),
    ("SIGKILL during a 16 MiB ring allreduce", 2, test_faults.DURING_TRANSFER, "transfer", 1, False),
    ("SIGKILL during a 16 MiB ring allreduce", 3, test_faults.DURING_TRANSFER, "transfer", 1, False),
    ("Python exception during a 16 MiB ring allreduce", 3, test_faults.DURING_TRANSFER, "transfer-exception", 1,
     False),
    ("SIGKILL during Keras fit", 2, test_faults_keras.DURING_FIT, "fit", 1, True),
    ("rank 0 SIGKILLed while writing a checkpoint", 2, test_faults_keras.DURING_CHECKPOINT, "checkpoint", 0, True),
    # Frozen ranks (SIGSTOP), TFRING_PEER_TIMEOUT_S=3: the delay is the timeout by design.
    ("SIGSTOP during Keras fit (peer timeout 3 s)", 2, test_faults_frozen.FROZEN_IN_FIT, "fit", 1, True),
    ("SIGSTOP during Keras fit (peer timeout 3 s)", 3, test_faults_frozen.FROZEN_IN_FIT, "fit", 1, True),
    ("SIGSTOP during a 16 MiB ring allreduce (peer timeout 3 s)", 3, test_faults_frozen.FROZEN_IN_TRANSFER,
     "transfer", 1, False),
]
# Host-level faults (issue 32): 3 emulated hosts x 2 ranks, host 2 (ranks 4, 5) lost.
HOST_TIMEOUT = f"peer timeout {test_host_faults.PEER_TIMEOUT_S:g} s"
HOST_SCENARIOS = [
    ("every process of one host SIGKILLed (3 emulated hosts x 2 ranks)", "kill"),
    (f"one host's link cut (3 emulated hosts x 2 ranks, {HOST_TIMEOUT})", "cut"),
    (f"every process of one host SIGSTOPped (3 emulated hosts x 2 ranks, {HOST_TIMEOUT})", "freeze"),
]
FROZEN_ENV = {"TFRING_PEER_TIMEOUT_S": str(test_faults_frozen.PEER_TIMEOUT_S)}
FROZEN_SCRIPTS = (test_faults_frozen.FROZEN_IN_FIT, test_faults_frozen.FROZEN_IN_TRANSFER)


def one_run(np_, script, stage, victim, needs_dir):
    with tempfile.TemporaryDirectory() as tmp:
        args = (stage, tmp) if needs_dir else (stage,)
        result = run_job(np_, script, script_args=args, timeout=120, check=False, args=("--grace-period-s", "20"),
                         env=FROZEN_ENV if script in FROZEN_SCRIPTS else None)
        ended = time.time()
    delays, _ = test_faults._times(result, np_, victim=victim)
    t0 = float(rank_output(result.stdout, victim).split("T0 ")[1].split()[0])
    return [d for d, _, _ in delays.values()], ended - t0, sorted({kind for _, kind, _ in delays.values()}), \
        result.returncode


def cut_run():
    """A network-namespace link taken down mid-allreduce (np=2, one rank per namespace):
    (delays of both ranks from the cut to their error, to the launcher's exit), error classes,
    exit code."""
    hosts = NetnsHosts(2)
    hosts.create()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            marker, cut = os.path.join(tmp, "running"), []

            def cutter():
                deadline = time.monotonic() + 60
                while not os.path.exists(marker) and time.monotonic() < deadline:
                    time.sleep(0.01)
                cut.append(time.time())
                subprocess.run([tool("ip"), "link", "set", hosts._veths[1], "down"], check=True, timeout=10)

            threading.Thread(target=cutter, daemon=True).start()
            result = run_job(2, test_faults_frozen.CUT_OFF, script_args=("cut", marker), timeout=90, check=False,
                             env=FROZEN_ENV, args=("-H", f"{hosts.names[0]}:1,{hosts.names[1]}:1",
                                                   "--network-interface", hosts.interface, "--remote-command",
                                                   "ip netns exec {host} sh -c {command}", "--grace-period-s", "5"))
            ended = time.time()
    finally:
        hosts.destroy()
    delays, kinds = [], set()
    for r in range(2):
        words = rank_output(result.stdout, r).split("ERR ")[1].split()
        delays.append(float(words[0]) - cut[0])
        kinds.add(words[1])
    return delays, ended - cut[0], sorted(kinds), result.returncode


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--match", default=None,
                        help="run only the faults whose name contains this text; their rows replace "
                             "the same rows of the existing JSON, the others are kept")
    parser.add_argument("--json", default=os.path.join(ROOT, "lab", "results", "faults.json"))
    args = parser.parse_args()
    rows = []
    for name, np_, script, stage, victim, needs_dir in SCENARIOS:
        if args.match and args.match not in name:
            continue
        survivor, launcher, kinds, codes = [], [], set(), set()
        for _ in range(args.repeat):
            delays, exit_delay, k, code = one_run(np_, script, stage, victim, needs_dir)
            survivor += delays
            launcher.append(exit_delay)
            kinds.update(k)
            codes.add(code)
        row = {"fault": name, "np": np_, "runs": args.repeat, "error_classes": sorted(kinds),
               "launcher_exit_codes": sorted(codes),
               "survivor_error_s": {"median": statistics.median(survivor), "max": max(survivor)},
               "launcher_exit_s": {"median": statistics.median(launcher), "max": max(launcher)}}
        rows.append(row)
        print(f"{name:<50} np={np_}  survivors: median {row['survivor_error_s']['median']:.3f} s, "
              f"max {row['survivor_error_s']['max']:.3f} s  launcher exit: median "
              f"{row['launcher_exit_s']['median']:.3f} s  ({', '.join(sorted(kinds))}; exit {sorted(codes)})",
              flush=True)
    why = _netns_unavailable()
    cut_name = "network link taken down mid-allreduce, 2 network namespaces (peer timeout 3 s)"
    if args.match and args.match not in cut_name:
        pass
    elif why:
        print(f"network-namespace cut skipped: {why}")
    else:
        name = cut_name
        survivor, launcher, kinds, codes = [], [], set(), set()
        for _ in range(args.repeat):
            delays, exit_delay, k, code = cut_run()
            survivor += delays
            launcher.append(exit_delay)
            kinds.update(k)
            codes.add(code)
        rows.append({"fault": name, "np": 2, "runs": args.repeat, "error_classes": sorted(kinds),
                     "launcher_exit_codes": sorted(codes),
                     "survivor_error_s": {"median": statistics.median(survivor), "max": max(survivor)},
                     "launcher_exit_s": {"median": statistics.median(launcher), "max": max(launcher)}})
        print(f"{name}: both ranks' errors median {rows[-1]['survivor_error_s']['median']:.3f} s, "
              f"launcher exit median {rows[-1]['launcher_exit_s']['median']:.3f} s", flush=True)
    for name, kind in HOST_SCENARIOS:
        if (args.match and args.match not in name) or why:
            continue
        survivor, launcher, codes = [], [], set()
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                delays, exit_delay, code = test_host_faults.static_job(kind, pathlib.Path(tmp))
            survivor += list(delays.values())
            launcher.append(exit_delay)
            codes.add(code)
        rows.append({"fault": name, "np": 6, "runs": args.repeat, "error_classes": ["PeerLostError"],
                     "launcher_exit_codes": sorted(codes),
                     "survivor_error_s": {"median": statistics.median(survivor), "max": max(survivor)},
                     "launcher_exit_s": {"median": statistics.median(launcher), "max": max(launcher)}})
        print(f"{name}: survivors median {rows[-1]['survivor_error_s']['median']:.3f} s, max "
              f"{rows[-1]['survivor_error_s']['max']:.3f} s; launcher exit median "
              f"{rows[-1]['launcher_exit_s']['median']:.3f} s (exit {sorted(codes)})", flush=True)
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    if args.match and os.path.exists(args.json):
        with open(args.json) as f:
            old = json.load(f)["results"]
        new = {(r["fault"], r["np"]): r for r in rows}
        rows = [new.pop((r["fault"], r["np"]), r) for r in old] + list(new.values())
    with open(args.json, "w") as f:
        json.dump({"host": platform.node(), "results": rows}, f, indent=1)


if __name__ == "__main__":
    main()
