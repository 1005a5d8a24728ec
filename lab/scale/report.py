"""Renders the scale lab's results: fits the model (model.py) to
lab/results/scale_local.json (the old design: the star and the full mesh; + scale_store.json,
scale_hosts.json) and to the runs of the design as built (TREE_RUNS: the control tree and
lazy connections), draws one plot per quantity into lab/records/images/scale_*.png (measured points
of both designs, the fits here, both designs predicted to 4,096 ranks) and rewrites the part
of lab/records/scaling.md between the GENERATED markers (tables of the measured medians, the fitted
costs, the predictions).

    python lab/scale/report.py      # or: python lab/scale/run.py --report

Plots need matplotlib; without it the tables are still written (and it says so).
"""

import dataclasses
import glob
import json
import math
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from lab.scale import jobs
from lab.scale import model as model_lib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "lab", "results")
IMAGES = os.path.join(ROOT, "lab", "records", "images")
DOC = os.path.join(ROOT, "lab", "records", "scaling.md")
BEGIN, END = "<!-- GENERATED: lab/scale/report.py -->", "<!-- END GENERATED -->"
PREDICT = [128, 256, 512, 1024, 2048, 4096, 10000]
# Lab runs of the design as built (control tree, fanout 4; lazy data connections past 8
# ranks), TCP and shared memory on one host. Left out: scale_tree64 / scale_fanout4 (the tree
# with a full mesh), scale_fanout0 / scale_star64 (the star), scale_tree_lazy_after (a build
# whose link questions still opened connections: its descriptors after work are not today's).
TREE_RUNS = ("control_tree_medians", "control_tree", "tree_lazy", "shm_oversub", "shm_oversub4",
             "shm_oversub_after", "control_tree_paced")
# Among them, the runs whose ranks pace their messages up the tree (ParentPacer, the default
# since 944817b): the other ranks' messages per step are fitted to these alone
# (scale_control_tree_unpaced.json, the same build with pacing off, is left out).
PACED_RUNS = ("control_tree_paced",)


def load_tree_runs(names=TREE_RUNS):
    return [p for p in (load_json(name) for name in names) if p]


def load_json(name):
    path = os.path.join(DATA, f"scale_{name}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def load_local():
    """scale_local.json merged with any scale_local_run*.json (more sessions of the same
    set): each size's runs together, every dead-rank job kept."""
    base = load_json("local")
    if base is None:
        return None
    extra = [load_json(os.path.basename(p)[len("scale_"):-len(".json")])
             for p in sorted(glob.glob(os.path.join(DATA, "scale_local_run*.json")))]
    sessions = [base, *extra]
    merged, faults = {}, []
    for payload in sessions:
        for res in payload["results"]:
            key = (res["np"], res["shm"])
            merged.setdefault(key, {"np": res["np"], "shm": res["shm"], "runs": [], "kill": None})
            merged[key]["runs"] += res["runs"]
            if res.get("kill"):
                faults.append({"np": res["np"], "shm": res["shm"], "runs": [], "median": None, "kill": res["kill"]})
    for res in merged.values():
        res["median"] = jobs.medians(res["runs"]) if res["runs"] else None
    return {**base, "sessions": [p["machine"] for p in sessions], "results": list(merged.values()) + faults}


def fmt_s(seconds):
    if seconds is None:
        return "-"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} us"


def fmt_n(value, digits=1):
    if value is None:
        return "-"
    if abs(value) >= 1e6:
        return f"{value / 1e6:.1f} M"
    if abs(value) >= 1e4:
        return f"{value / 1e3:.0f} k"
    return f"{value:.{digits}f}" if value != int(value) else f"{int(value)}"


def rng(med, key, scale=1.0):
    lo, hi = med.get(key + "_range", [None, None])
    return "" if lo is None or lo == hi else f" ({fmt_s(lo * scale)}-{fmt_s(hi * scale)})"


# ---------------------------------------------------------------- tables


def load(result):
    """The 1-minute load average before each of the result's jobs (min-max)."""
    loads = [run["loadavg_before"][0] for run in result["runs"]]
    return f"{min(loads):.1f}-{max(loads):.1f}" if loads else "-"


def local_tables(local):
    sessions = local.get("sessions", [local["machine"]])
    when = "; ".join(f"{m['date']} (commit {m['commit']})" for m in sessions)
    jobs_per_row = max((len(r["runs"]) for r in local["results"]), default=0)
    lines = [(f"Measured {when}, {local['machine']['cpus']} cores, {local['machine']['memory_gb']} GB; medians of "
             f"{jobs_per_row} jobs per row ({len(sessions)} session(s) of {local['repeats']}; range in brackets). Times are upper bounds: every rank "
             "shares the same 2 cores (and other engineers' tests ran meanwhile, see the load); counts are exact.\n")]
    for shm in ("off", "on"):
        rows = [r for r in local["results"] if r["shm"] == shm and r["median"]]
        if not rows:
            continue
        lines.append(f"**One host, {'TCP only (`TFRING_SHM=0`)' if shm == 'off' else 'shared memory (default)'}**\n")
        lines.append("| ranks | init (slowest rank: from launch / in `init()`) | 8 B allreduce | 150-tensor cached step "
                     "| rank 0 control msgs / bytes per step | other ranks' msgs / bytes per step | rank 0 CPU per step "
                     "| rank 0 fds (sockets) | other fds | RSS rank 0 | shutdown / tfringrun exit after | load |")
        lines.append("|" + "---|" * 12)
        for r in rows:
            m = r["median"]
            lines.append(
                f"| {r['np']} | {fmt_s(m['init_from_launch_s'])} / {fmt_s(m['init_call_s'])}{rng(m, 'init_call_s')} "
                f"| {fmt_s(m['latency_8b_s'])}{rng(m, 'latency_8b_s')} | {fmt_s(m['step_s'])}{rng(m, 'step_s')} "
                f"| {fmt_n(m['rank0_control_messages_per_step'])} / {fmt_n(m['rank0_control_bytes_per_step'], 0)} "
                f"| {fmt_n(m['other_control_messages_per_step_mean'])} / {fmt_n(m['other_control_bytes_per_step_mean'], 0)} "
                f"| {fmt_s(m['rank0_cpu_s_per_step'])} | {m['rank0_fds']:.0f} ({m['rank0_sockets']:.0f}) "
                f"| {m['other_fds_max']:.0f} | {m['rank0_rss_mb']:.0f} MB "
                f"| {fmt_s(m['shutdown_s'])} / {fmt_s(m['exit_after_shutdown_s'])} "
                f"| {load(r)} |")
        lines.append("")
    hb = [r for r in local["results"] if r["shm"] == "off" and r["median"]]
    if hb:
        lines.append("**Heartbeats at rank 0** (every rank idle 3 s; `ss -tinpH` byte counters of rank 0's TCP sockets "
                     "against the exact figure from the code: 2(N-1) frames of 5 bytes per second each way)\n")
        lines.append("| ranks | measured sent / received (B/s) | from the code (B/s) | control messages meanwhile |")
        lines.append("|---|---|---|---|")
        for r in hb:
            m = r["median"]
            exact = (model_lib.heartbeat_rank0_frames_per_s_today(r["np"], design=local.get("control_plane", "star"))
                     * model_lib.HEARTBEAT_FRAME_BYTES)
            lines.append(f"| {r['np']} | {m['heartbeat_rank0_bytes_sent_per_s']:.0f} / "
                         f"{m['heartbeat_rank0_bytes_received_per_s']:.0f} | {exact:.0f} | {m['idle_control_messages']:.0f} |")
        lines.append("")
    return lines


def fault_tables(payloads):
    """The dead-rank (SIGKILL) and frozen-rank (SIGSTOP) jobs of every payload, one row each."""
    lines = []
    titles = {"kill": "**A rank SIGKILLed mid-loop** (the last rank, after 100 8-byte allreduces; TCP; one row per job)",
              "freeze": "**A rank frozen mid-loop** (SIGSTOP, the last rank, after 100 8-byte allreduces; TCP; "
                        "`TFRING_PEER_TIMEOUT_S=2`, so heartbeats every 0.2 s; one row per job)"}
    for key, title in titles.items():
        jobs_ = sorted(((r["np"], r[key]) for payload in payloads if payload for r in payload["results"]
                        if r.get(key) and r[key].get("kill")), key=lambda item: item[0])
        if not jobs_:
            continue
        lines += [title + "\n", ("| ranks | survivors that named it | slowest survivor / median | tfringrun exited after "
                  "| error |"), "|---|---|---|---|---|"]
        for n, row in jobs_:
            k = row["kill"]
            lines.append(f"| {n} | {k['survivors_named']} of {k['survivors']} | {fmt_s(k['detect_max_s'])} / "
                         f"{fmt_s(k['detect_median_s'])} | {fmt_s(k['launcher_exit_s'])} (exit {row['returncode']}) "
                         f"| `{k['error_type']}: {(k['message'] or '')[:90]}...` |")
        lines.append("")
    return lines


def hosts_table(hosts):
    lines = [(f"Measured {hosts['machine']['date']}, commit {hosts['machine']['commit']}; each host's link shaped to "
             f"{hosts['rate_gbit']:g} Gbit/s each way (`tc tbf`); medians of {hosts['repeats']} jobs. "
             "Limit = 2(H-1)/H x S / link rate (what the best algorithm needs); a flat ring's ceiling = "
             "[2(H-1)/H] / [2(N-1)/N] of it (each host's one ring edge out carries 2(N-1)/N x S).\n")]
    lines.append("| hosts x ranks | 8 B allreduce | 1 MiB: time (of the link limit) | 16 MiB: time (of the link limit) "
                 "| a flat ring's ceiling | ring at % of its own ceiling (16 MiB) | load |")
    lines.append("|---|---|---|---|---|---|---|")
    for r in hosts["results"]:
        m = r["median"]
        if not m:
            continue
        h, n, rate = r["hosts"], r["np"], r["rate_bits"] / 8
        ceiling = model_lib.link_bound_fraction(h, n)
        cells = []
        for size in ("1048576", "16777216"):
            t = m.get("big_s", {}).get(size)
            if t is None or h < 2:
                cells.append("-")
                continue
            limit = model_lib.link_limit_s(h, int(size), rate)
            cells.append(f"{fmt_s(t)} ({limit / t:.0%})")
        t16 = m.get("big_s", {}).get("16777216")
        own = f"{model_lib.link_limit_s(h, 16 << 20, rate) / t16 / ceiling:.0%}" if t16 and h > 1 else "-"
        lines.append(f"| {h} x {r['ranks_per_host']} | {fmt_s(m['latency_8b_s'])}{rng(m, 'latency_8b_s')} | "
                     f"{cells[0]} | {cells[1]} | {ceiling:.0%} | {own} | {load(r)} |")
    lines.append("")
    return lines


def data_rows(local_bw, hosts=()):
    """Rows of the data ring's per-collective and per-byte costs (big allreduces)."""
    rows = []
    for label, payload, match in (("data ring, TCP, this host", local_bw, {"shm": "off"}),
                                  ("data ring, shared memory, this host", local_bw, {"shm": "on"})):
        cost = model_lib.data_ring_cost(model_lib.big_points(payload, **match))
        if cost:
            rows.append(f"| {label}, large tensors | {fmt_s(cost[0])} + {cost[1] * 1e9:.2f} ns per byte sent by each "
                        f"rank (2(n-1)/n x S): {1 / cost[1] / 1e9:.2f} GB/s | 1 and 16 MiB allreduces, 2-8 ranks "
                        "(scale_local_bw.json) |")
    for res in [res for payload in hosts for res in (payload or {}).get("results", [])]:
        cost = model_lib.data_ring_cost(model_lib.big_points({"results": [res]}))
        if cost and res["hosts"] > 1:
            rate = res["rate_bits"] / 8
            how = "TCP only" if res.get("shm") == "off" else "shm inside hosts"
            rows.append(f"| data ring across emulated hosts, {res['hosts']} x {res['ranks_per_host']}, {how} | "
                        f"{fmt_s(cost[0])} + {cost[1] * 1e9:.2f} ns per byte on each host's link: "
                        f"{1 / cost[1] / 1e6:.0f} MB/s of the link's {rate / 1e6:.0f} MB/s | 1 and 16 MiB, flat ring |")
    return rows


def tree_table(payloads):
    """The design as built, measured: each size's jobs of every TREE_RUNS payload merged."""
    merged = {}
    for payload in payloads:
        for res in payload["results"]:
            merged.setdefault((res["np"], res["shm"]), []).extend(res["runs"])
    if not merged:
        return []
    when = "; ".join(f"{p['machine']['date']} (commit {p['machine']['commit']})" for p in payloads)
    lines = [(f"The fits below use these jobs: {when}; one host, medians over the jobs (range in brackets), "
              "counts exact, times upper bounds.\n"),
             ("| ranks | transport | jobs | rank 0 msgs / bytes per cached step | rounds per step | busiest other rank's "
              "msgs per step | rank 0 CPU per step | rank 0 fds after init / after work | init (in `init()`) "
              "| 8 B allreduce | load |"), "|" + "---|" * 11]
    for (n, shm), runs in sorted(merged.items()):
        m = jobs.medians(runs)
        after = f"{m['rank0_fds_after_work']:.0f}" if "rank0_fds_after_work" in m else "-"
        lines.append(
            f"| {n} | {'TCP' if shm == 'off' else 'shm'} | {len(runs)} | {fmt_n(m['rank0_control_messages_per_step'])} / "
            f"{fmt_n(m['rank0_control_bytes_per_step'], 0)} | {m['collectives_per_step']:.2f} "
            f"| {fmt_n(m['other_control_messages_per_step_max'])} | {fmt_s(m['rank0_cpu_s_per_step'])} "
            f"| {m['rank0_fds']:.0f} / {after} | {fmt_s(m['init_call_s'])}{rng(m, 'init_call_s')} "
            f"| {fmt_s(m['latency_8b_s'])}{rng(m, 'latency_8b_s')} | {load({'runs': runs})} |")
    lines.append("")
    return lines


def model_tables(model, store, local_bw=None, hosts=()):
    a, t = model.assumptions, model.tree
    lines = [("**Fitted costs, the old design** (the star and the full mesh, scale_local*.json; least squares over "
             "every job, coefficients >= 0; n = ranks)\n"),
             "| path | fitted | meaning |", "|---|---|---|",
             (f"| control star, rank 0 sends | {model.rank0_messages[0]:.2f} + {model.rank0_messages[1]:.2f} (n-1) msgs, "
             f"{model.rank0_bytes[0]:.0f} + {model.rank0_bytes[1]:.0f} (n-1) bytes per cached step | one response per rank "
             "per negotiation cycle, naming each cached tensor |"),
             (f"| control star, each other rank sends | {model.worker_messages:.1f} msgs, {model.worker_bytes:.0f} bytes "
             "per cached step | requests as tensors arrive, independent of n |"),
             (f"| rank 0's CPU | {fmt_s(model.rank0_cpu[0])} + {fmt_s(model.rank0_cpu[1])} (n-1) per cached step; "
             f"{fmt_s(model.message_cpu_s)} per control message sent or received | whole process (getrusage), n >= 4 |"),
             (f"| data ring, TCP, this host | {fmt_s(model.latency_tcp[0])} + {fmt_s(model.latency_tcp[1])} per ring step "
             "(2(n-1) steps) | 8-byte allreduce; a step here is a process wake-up on a shared core |"),
             (f"| data ring, shared memory, this host | {fmt_s(model.latency_shm[0])} + {fmt_s(model.latency_shm[1])} "
             "per ring step | the same, oversubscribed (more ranks than cores), before the futex waits |"),
             (f"| store (init) | {fmt_s(model.init_lab[0])} + {model.init_lab[1] * 1e6:.0f} us per store request "
             f"+ {fmt_s(model.init_lab[2])} per peer | slowest rank's `init()` here; requests (exact, from the code): "
             "1.5 n(n-1) + 4n in these runs (every rank read every record), 4n - 2 since the roster |"),
             (f"| store request, measured alone | {fmt_s(store['round_trip_s']) if store else '-'} round trip, "
             f"{fmt_s(store['cpu_s_per_request']) if store else '-'} CPU (both ends) | "
             "lab/scale/store_cost.py, one client |"),
             (f"| heartbeats | in these runs (a star) 2(n-1) frames of {model_lib.HEARTBEAT_FRAME_BYTES} B per interval each "
             "way at rank 0; since the ring 4 at every rank (2 at 2 ranks) (exact; interval = TFRING_PEER_TIMEOUT_S/10 "
             "clamped to [50 ms, 1 s]) | star: each rank pinged rank 0 and rank 0 each rank; ring: each rank pings its "
             "two neighbours; every ping is answered |"),
             (f"| descriptors | in these runs rank 0: 3(n-1) + 1 + {model.base_fds_rank0}, others: (n-1) + 3 + "
             f"{model.base_fds_worker} (exact) | data mesh, control star, heartbeat star, store; the rest is Python's and "
             "the runtime's eventfds |"),
             (f"| dead rank (SIGKILL) | {fmt_s(model.crash_detect_s)} at 2 ranks (median of its jobs); here {fmt_s(model.crash_lab[0])} + "
             f"{fmt_s(model.crash_lab[1])} (n-1) | slowest survivor; every survivor holds a socket to the dead rank and "
             "sees it close; past 2 ranks the survivors queue for 2 cores (predictions: one rank per core) |"),
             ("| frozen rank (SIGSTOP) | TFRING_PEER_TIMEOUT_S + at most one heartbeat interval (exact from the code: "
              "in these runs rank 0 judged a peer silent for the timeout and relayed the verdict to the n-2 others) "
              "| measured with a 2 s timeout: see the frozen-rank table |"),
             *data_rows(local_bw, hosts), ""]
    if t:
        f = model_lib.CONTROL_FANOUT
        lines += [(f"**Fitted costs, the design as built** (control tree of fanout {f}, lazy data connections past "
                  f"{model_lib.FULL_MESH_UP_TO_RANKS} ranks; the jobs of the table above, TCP)\n"),
                  "| path | fitted or exact | meaning |", "|---|---|---|",
                  (f"| rank 0's control messages | min({f}, n-1) x rounds per cached step (exact), rounds = "
                   f"{t.rounds[0]:.2f} + {t.rounds[1]:.2f} log2 n (fitted) | rank 0 answers each child once per "
                   "negotiation round; the rounds grow here as ranks queue for 2 cores and the 150 tensors straggle |"),
                  (f"| rank 0's control bytes | {t.bytes_per_message:.0f} bytes per message (median) | a response names "
                   "the round's cached tensors |"),
                  (f"| other ranks' messages | busiest {t.busiest_other_messages:.1f}, mean {t.other_messages_mean:.1f} "
                   "per cached step (medians past 8 ranks of the paced runs; not growing with n) | a relay paces its "
                   "messages to its parent (ParentPacer) and passes each round's responses to its children |"),
                  (f"| rank 0's CPU | {fmt_s(t.rank0_cpu[0])} + {fmt_s(t.rank0_cpu[1])} log2 n per cached step | whole "
                   "process (getrusage): its children's messages and the step's recursive-doubling data steps |"),
                  (f"| descriptors | rank 0: {model_lib.CONTROL_FANOUT} children + 2 heartbeat + store + listener + "
                   f"{model.base_fds_rank0} = 13 after init (exact; past {model_lib.FULL_MESH_UP_TO_RANKS} ranks), plus "
                   "one per data peer a collective used: log2 n recursive-doubling partners (+1 off a power of two), "
                   "the ring's 2 neighbours for large allreduces | measured 13 after init and 13 + log2 n after the "
                   "probe's small allreduces at 16-64 ranks |"),
                  (f"| init here | {fmt_s(t.init_lab[0])} + {fmt_s(t.init_lab[1])} (n-1) | slowest rank's `init()`, "
                   "n processes starting on 2 cores (4n - 2 store requests) |"),
                  (f"| 8 B allreduce here | TCP {fmt_s(t.latency_tcp_lab[0])} + {fmt_s(t.latency_tcp_lab[1])} (n-1); "
                   f"shm {fmt_s(t.latency_shm_lab[0])} + {fmt_s(t.latency_shm_lab[1])} (n-1) | recursive doubling "
                   "(log2 n steps) after a negotiation round; every step a wake-up on a shared core |"),
                  (f"| dead rank (SIGKILL) here | {fmt_s(t.crash_lab[0])} + {fmt_s(t.crash_lab[1])} (n-1) | slowest "
                   "survivor; those without a socket to it hear from a neighbour |"),
                  ""]
    lines += ["**Assumptions of the predictions**\n"]
    why = {
        "hop_s": "one network hop between hosts, kernel to kernel (issue 31's figure)",
        "store_cores": "cores of the store's host serving requests in parallel (a thread per client today)",
        "handshake_round_trips": "a connection: TCP connect, the HMAC challenge/response, the hello",
        "peer_timeout_s": "TFRING_PEER_TIMEOUT_S's default",
        "ulimit_fds": "the default soft `ulimit -n`",
        "link_bytes_per_s": "the store host's link, 10 Gbit/s (issue 30's init target): every rank reads the "
                            "whole roster through it",
        "record_bytes": "one rank's roster entry: the settings that must match (~420 B), a 64-core CPU mask "
                        "(256 B), address, host id, hostname; the old design's host record taken alike",
        "message_cpu_s": f"CPU at one end of a control message; None = the old design's fit "
                         f"({fmt_s(model.message_cpu_s)}, an upper bound measured with ranks sharing 2 cores)",
        "tensors_per_step": "the probe's cached step",
    }
    for key, reason in why.items():
        lines.append(f"- `{key}` = {getattr(a, key)}: {reason}.")
    lines += [
        ("- One rank per core, one process per rank; per-message CPU costs are the ones fitted here (upper bounds: "
        "measured with N ranks sharing 2 cores)."),
        ("- Linear terms stay linear past the sizes measured (the structure is read from the code: one response per "
        "child per round, one socket per peer, one heartbeat per neighbour); the tree's rounds per step keep "
        "growing with log2 n as fitted here (pessimistic: with one rank per core fewer batches straggle)."),
        ("- The old design's init is bounded below by the largest of: the store's work (all requests / store cores), "
        "the records through the store's link, the last rank's chain (2(n-1) store reads and n-1 connections one "
        "after another) and rank 0's single acceptor (3(n-1) handshakes); plus what does not grow with n: `init()` "
        f"at 2 ranks measured here ({fmt_s(model.init_fixed_s)})."),
        ("- The design as built: init = that fixed part + rank 0 reading the n-1 roster entries one round trip "
         "each + the roster (n entries) read by every rank through the store's link (n^2 entries: the term that "
         "grows fastest) + a connection to its control parent and heartbeat neighbours; an 8-byte allreduce = "
         "a bit up and the response down the tree (2 x depth relays, each a hop and a message received and "
         "sent) + recursive doubling (log2 n hops, +2 off a power of two); descriptors counted after a job that "
         "ran small and large allreduces (an all-to-all still connects every pair)."),
        ""]
    return lines


def prediction_table(model):
    keys = [("init_s", "init (10 Gbit/s)", fmt_s), ("store_requests", "store requests", fmt_n),
            ("rank0_control_messages_per_step", "rank 0 msgs / cached step", fmt_n),
            ("busiest_other_messages_per_step", "busiest other rank's msgs / cached step", fmt_n),
            ("rank0_control_bytes_per_step", "rank 0 bytes / cached step", fmt_n),
            ("rank0_cpu_s_per_step", "rank 0 CPU / cached step", fmt_s),
            ("rank0_fds", "rank 0 fds", fmt_n), ("worker_fds", "other ranks' fds (most)", fmt_n),
            ("latency_8b_s", "8 B allreduce (30 us hops)", fmt_s),
            ("heartbeat_rank0_frames_per_s", "heartbeat frames/s at rank 0", fmt_n),
            ("heartbeat_rank0_cpu_share", "heartbeat CPU at rank 0 (cores)", lambda v: f"{v:.3f}"),
            ("crash_detect_s", "killed rank named (all survivors)", fmt_s),
            ("freeze_detect_s", "frozen rank named", fmt_s)]
    lines = [("**PREDICTIONS** (model.py; the old design (star + full mesh) / the design as built (tree + lazy); "
             "nothing here was measured at these sizes)\n"),
             "| quantity | " + " | ".join(str(n) for n in PREDICT) + " |", "|---|" + "---|" * len(PREDICT)]
    for key, label, f in keys:
        cells = [f"{f(model.old(n)[key])} / {f(model.now(n)[key])}" for n in PREDICT]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    lines += target_table(model)
    lines += [("**Which limit a growing job hits first** (model; budget crossed at the size shown; sorted by the "
              "design as built)\n"),
              ("| limit | old design at 1,000 ranks | budget | why that budget | old design crosses it at "
               "| as built, at 1,000 | as built, crosses it at |"), "|---|---|---|---|---|---|---|"]
    for what, value, budget, why, at, new_value, new_at in model_lib.first_limit(model, 1000):
        f = fmt_n if "descriptors" in what else (lambda v: f"{v:.3f} cores" if v < 1 else f"{v:.1f}") \
            if "heartbeat" in what else fmt_s
        lines.append(f"| {what} | {f(value)} | {f(budget)} | {why} | {at or 'never (to 1 M)'} ranks | {f(new_value)} "
                     f"| {new_at or 'never (to 1 M)'} |")
    lines.append("")
    return lines


def target_table(model, n=1024):
    """Issue 30's and 31's targets that only the model can answer, for the design as built."""
    now, old = model.now(n), model.old(n)
    t = model.tree
    bound = t.rank0_messages_at_4 * math.log2(n)
    hop = model.assumptions.hop_s
    lat = {m: dataclasses.replace(model, assumptions=dataclasses.replace(model.assumptions, message_cpu_s=m))
           .now(n)["latency_8b_s"] for m in (0.0, 10e-6)}
    return [
        f"**Issue targets at {n:,} ranks, PREDICTED** for the design as built (the old design in brackets)\n",
        "| target | predicted | met? | what dominates |", "|---|---|---|---|",
        (f"| init over 10 Gbit/s <= 10 s (issue 30) | {fmt_s(now['init_s'])} ({fmt_s(old['init_s'])}) | "
         f"{'yes' if now['init_s'] <= 10 else 'no'} | rank 0 gathering the n entries one by one, then the "
         f"layouts and cards through the store's link ({now['store_read_bytes'] / 1e6:.0f} MB; the whole roster to "
         f"every rank was n^2 x {model.assumptions.record_bytes} B = {n * n * model.assumptions.record_bytes / 1e9:.2f} "
         f"GB); it crosses 10 s at {model_lib.crossing(model, 'init_s', 10.0, 'now') or 'never'} ranks |"),
        (f"| descriptors per rank at 1,000 ranks < 1,024 (issue 30) | {model.now(1000)['max_fds']:.0f} "
         f"({model.old(1000)['max_fds']:.0f}) | {'yes' if model.now(1000)['max_fds'] < 1024 else 'no'} | 13-14 "
         "control, heartbeat and store descriptors + log2 n + 3 data peers; an all-to-all would add n - 1 |"),
        (f"| rank 0's control messages per cached step grow no faster than log2 n (issue 30) | "
         f"{fmt_n(now['rank0_control_messages_per_step'])} ({fmt_n(old['rank0_control_messages_per_step'])}); "
         f"{now['rank0_control_messages_per_step'] / t.rank0_messages_at_4:.1f}x its {t.rank0_messages_at_4:.2f} "
         f"at 4 ranks, log2 n = {math.log2(n):.0f} | yes | {model_lib.CONTROL_FANOUT} children x the rounds per step "
         "(fitted to grow with log2 n) |"),
        (f"| no rank sends more than rank 0 at 4 ranks x log2 n = {bound:.0f} (issue 30) | busiest other rank "
         f"{fmt_n(now['busiest_other_messages_per_step'])} | {'yes' if now['busiest_other_messages_per_step'] <= bound else 'no'} "
         "| a constant (a relay's batches and rounds), under the bound from "
         f"{_first_n_where(lambda k: t.rank0_messages_at_4 * math.log2(k) >= t.busiest_other_messages)} ranks on |"),
        (f"| 8-byte allreduce <= 1 ms with {hop * 1e6:.0f} us hops (issue 31) | {fmt_s(now['latency_8b_s'])} with "
         f"{fmt_s(model.message_s)} of CPU per message end (the 2-core fit, an upper bound); "
         f"{fmt_s(lat[10e-6])} at 10 us; {fmt_s(lat[0.0])} with the CPU inside the hop "
         f"({fmt_s(old['latency_8b_s'])}) | {'yes' if now['latency_8b_s'] <= 1e-3 else 'only if a message end costs < ' + _max_cpu(model, n)} "
         f"| {2 * model_lib.control_tree_depth(n)} relays of the tree (depth {model_lib.control_tree_depth(n)}) "
         f"and {model_lib.recursive_doubling_steps(n)} data hops |"),
        ""]


def _first_n_where(predicate, largest=1 << 20):
    n = 2
    while n <= largest and not predicate(n):
        n *= 2
    return f"{n:,}" if n <= largest else "never"


def _max_cpu(model, n):
    """The CPU per message end under which the built design's 8-byte allreduce at n stays <= 1 ms."""
    a = model.assumptions
    depth = model_lib.control_tree_depth(n)
    left = 1e-3 - model_lib.recursive_doubling_steps(n) * a.hop_s - 2 * depth * a.hop_s
    return fmt_s(max(left, 0) / (4 * depth))


# ---------------------------------------------------------------- plots


def _points(local, key, shm="off"):
    xs, ys = [], []
    if key == "kill":  # one dead-rank job per size: its slowest survivor
        for res in local["results"]:
            if res.get("kill") and res["kill"].get("kill") and res["kill"]["kill"]["detect_max_s"] is not None:
                xs.append(res["np"])
                ys.append(res["kill"]["kill"]["detect_max_s"])
        return xs, ys
    for res in local["results"]:
        if res["shm"] != shm:
            continue
        for row in res["runs"]:
            if row.get(key) is not None:
                xs.append(res["np"])
                ys.append(row[key])
    return xs, ys


def plots(local, model, tree_runs=()):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    os.makedirs(IMAGES, exist_ok=True)
    tree = {"results": [res for p in tree_runs for res in p["results"]]}
    measured_n = sorted({r["np"] for r in local["results"]} | {r["np"] for r in tree["results"]})
    lab_n = list(range(2, max(measured_n) + 1))
    pred_n = [2 ** k for k in range(1, 13)]
    # (file, title, unit, measured [(payload, key, shm, label)], fitted lab curves [(key, label)], predicted key, line)
    old, now = (local, "old: star + mesh"), (tree, "as built: tree + lazy")
    specs = [
        ("init", "init() of the slowest rank", "seconds",
         [(old, "init_call_s", "off", "TCP"), (now, "init_call_s", "off", "TCP")],
         [("init_call_s", "old, fit here"), ("tree_init_call_s", "as built, fit here")], "init_s",
         (10.0, "issue 30: 10 s at 1,024 ranks (10 Gbit/s)")),
        ("control_messages", "rank 0's control messages per cached step", "messages",
         [(old, "rank0_control_messages_per_step", "off", "TCP"), (old, "rank0_control_messages_per_step", "on", "shm"),
          (now, "rank0_control_messages_per_step", "off", "TCP"), (now, "rank0_control_messages_per_step", "on", "shm")],
         [], "rank0_control_messages_per_step", None),
        ("control_bytes", "rank 0's control bytes per cached step", "bytes",
         [(old, "rank0_control_bytes_per_step", "off", "TCP"), (now, "rank0_control_bytes_per_step", "off", "TCP")],
         [], "rank0_control_bytes_per_step", None),
        ("other_messages", "the busiest other rank's control messages per cached step", "messages",
         [(old, "other_control_messages_per_step_max", "off", "TCP"),
          (now, "other_control_messages_per_step_max", "off", "TCP")],
         [], "busiest_other_messages_per_step", None),
        ("rank0_cpu", "rank 0's CPU per cached 150-tensor step", "seconds",
         [(old, "rank0_cpu_s_per_step", "off", "TCP"), (now, "rank0_cpu_s_per_step", "off", "TCP")],
         [("rank0_cpu_s_per_step", "old, fit here"), ("tree_rank0_cpu_s_per_step", "as built, fit here")],
         "rank0_cpu_s_per_step", None),
        ("fds", "the most descriptors a rank holds", "descriptors",
         [(old, "rank0_fds", "off", "rank 0, TCP"), (now, "rank0_fds", "off", "rank 0 after init, TCP"),
          (now, "rank0_fds_after_work", "off", "rank 0 after work, TCP"),
          (now, "other_fds_after_work_max", "off", "others after work, TCP")],
         [], "max_fds", (model.assumptions.ulimit_fds, "ulimit -n 1024")),
        ("latency", "8-byte allreduce", "seconds",
         [(old, "latency_8b_s", "off", "TCP"), (old, "latency_8b_s", "on", "shm"),
          (now, "latency_8b_s", "off", "TCP"), (now, "latency_8b_s", "on", "shm")],
         [("latency_8b_s", "old, TCP, fit here"), ("tree_latency_8b_s", "as built, TCP, fit here")], "latency_8b_s",
         (1e-3, "issue 31: 1 ms at 1,024 ranks")),
        ("heartbeat", "heartbeat bytes sent per second at rank 0", "bytes/s",
         [(old, "heartbeat_rank0_bytes_sent_per_s", "off", "ss, TCP"),
          (now, "heartbeat_rank0_bytes_sent_per_s", "off", "ss, TCP")], [], "heartbeat_rank0_bytes_per_s", None),
        ("dead_rank", "a SIGKILLed rank named by every survivor", "seconds",
         [(old, "kill", "off", "slowest survivor, TCP"), (now, "kill", "off", "slowest survivor, TCP")],
         [("crash_detect_s", "old, fit here"), ("tree_crash_detect_s", "as built, fit here")], "crash_detect_s", None),
    ]
    lab = {n: model.lab(n) for n in lab_n}
    written = []
    for name, title, unit, measured, fits, pred_key, hline in specs:
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        for (payload, design), key, shm, label in measured:
            xs, ys = _points(payload, key, shm)
            if xs:
                ax.scatter(xs, ys, s=14, marker="o" if payload is local else "^", zorder=3,
                           label=f"measured, {design}, {label}")
        for key, label in fits:
            if key in lab[lab_n[0]]:
                ax.plot(lab_n, [lab[n][key] for n in lab_n], ":", color="C3" if key.startswith("tree_") else "k",
                        label=label)
        factor = 0.5 if pred_key == "heartbeat_rank0_bytes_per_s" else 1.0  # sent only
        ax.plot(pred_n, [model.old(n)[pred_key] * factor for n in pred_n], "C0-",
                label="old design, one rank per core (PREDICTION)")
        ax.plot(pred_n, [model.now(n)[pred_key] * factor for n in pred_n], "C2--",
                label="as built, one rank per core (PREDICTION)")
        if hline:
            ax.axhline(hline[0], color="grey", lw=0.8)
            ax.text(2, hline[0] * 1.1, hline[1], fontsize=8, color="grey")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("ranks")
        ax.set_ylabel(unit)
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=6)
        fig.tight_layout()
        path = os.path.join(IMAGES, f"scale_{name}.png")
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append((name, title, path))
    return written


# ---------------------------------------------------------------- the page


def generate(draw=True):
    local, hosts, store = load_local(), load_json("hosts"), load_json("store")
    if local is None:
        raise SystemExit("no lab/results/scale_local.json: run lab/scale/run.py --sizes ... first")
    faults = load_json("local_faults")
    tree_runs = load_tree_runs()
    # the fault-only jobs add dead-rank samples (their rows have no other runs)
    model = model_lib.Model.fit({**local, "results": local["results"] + (faults or {}).get("results", [])}, store,
                                tree_runs=tree_runs, paced_runs=load_tree_runs(PACED_RUNS))
    lines = [BEGIN, "", "### Measured: many ranks on one host, the old design (star + full mesh)", ""]
    lines += local_tables(local)
    lines += fault_tables([local, faults])
    if tree_runs:
        lines += ["### Measured: many ranks on one host, the design as built (control tree + lazy connections)", ""]
        lines += tree_table(tree_runs)
    for payload, how in ((hosts, "shared memory between the ranks of a host (default)"),
                         (load_json("hosts_tcp"), "TCP only (`TFRING_SHM=0`)")):
        if payload:
            lines += [f"### Measured: emulated hosts, {how}", ""]
            lines += hosts_table(payload)
    lines += ["### The model", ""]
    lines += model_tables(model, store, load_json("local_bw"), (hosts, load_json("hosts_tcp")))
    lines += prediction_table(model)
    images = plots(local, model, tree_runs) if draw else []
    if images is None:
        print("matplotlib is not installed: tables written, the plots already there kept", file=sys.stderr)
        images = [(None, os.path.basename(p)[len("scale_"):-len(".png")].replace("_", " "), p)
                  for p in sorted(glob.glob(os.path.join(IMAGES, "scale_*.png")))]
    if images:
        lines += ["### Plots (measured points of both designs, the fits on this host, both designs predicted)", ""]
        for _, title, path in images:
            lines.append(f"![{title}](images/{os.path.basename(path)})")
        lines.append("")
    lines.append(END)
    return "\n".join(lines), model


def main():
    text, model = generate()
    with open(DOC) as f:
        doc = f.read()
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"{DOC} has no {BEGIN} ... {END} block")
    head, rest = doc.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    with open(DOC, "w") as f:
        f.write(head + text + tail)
    with open(os.path.join(DATA, "scale_model.json"), "w") as f:
        json.dump({"fitted": model.to_dict(),
                   "old": {n: model.old(n) for n in PREDICT}, "now": {n: model.now(n) for n in PREDICT}},
                  f, indent=1)
    print(f"wrote {os.path.relpath(DOC, ROOT)} and lab/results/scale_model.json")


if __name__ == "__main__":
    main()
