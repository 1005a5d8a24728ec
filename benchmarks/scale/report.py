"""Renders the scale lab's results: fits the model (model.py) to
docs/benchmarks/scale_local.json (+ scale_store.json, scale_hosts.json), draws one plot per
quantity into docs/images/scale_*.png (measured points, the fit here, today's design and
the redesign predicted to 4,096 ranks) and rewrites the part of docs/scaling.md between
the GENERATED markers (tables of the measured medians, the fitted costs, the predictions).

    python benchmarks/scale/report.py      # or: python benchmarks/scale/run.py --report

Plots need matplotlib; without it the tables are still written (and it says so).
"""

import glob
import json
import os
import sys

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from benchmarks.scale import jobs
from benchmarks.scale import model as model_lib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "docs", "benchmarks")
IMAGES = os.path.join(ROOT, "docs", "images")
DOC = os.path.join(ROOT, "docs", "scaling.md")
BEGIN, END = "<!-- GENERATED: benchmarks/scale/report.py -->", "<!-- END GENERATED -->"
PREDICT = [128, 256, 512, 1024, 2048, 4096]


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


def model_tables(model, store, local_bw=None, hosts=()):
    a = model.assumptions
    lines = ["**Fitted costs** (least squares over every job, coefficients >= 0; n = ranks)\n",
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
             "per ring step | the same, oversubscribed (more ranks than cores) |"),
             (f"| store (init) | {fmt_s(model.init_lab[0])} + {model.init_lab[1] * 1e6:.0f} us per store request "
             f"+ {fmt_s(model.init_lab[2])} per peer | slowest rank's `init()` here; requests (exact, from the code): "
             "1.5 n(n-1) + 4n in these runs (every rank read every record), 4n - 2 since the roster |"),
             (f"| store request, measured alone | {fmt_s(store['round_trip_s']) if store else '-'} round trip, "
             f"{fmt_s(store['cpu_s_per_request']) if store else '-'} CPU (both ends) | "
             "benchmarks/scale/store_cost.py, one client |"),
             (f"| heartbeats | in these runs (a star) 2(n-1) frames of {model_lib.HEARTBEAT_FRAME_BYTES} B per interval each "
             "way at rank 0; since the ring 4 at every rank (2 at 2 ranks) (exact; interval = TFRING_PEER_TIMEOUT_S/10 "
             "clamped to [50 ms, 1 s]) | star: each rank pinged rank 0 and rank 0 each rank; ring: each rank pings its "
             "two neighbours; every ping is answered |"),
             (f"| descriptors | in these runs rank 0: 3(n-1) + 1 + {model.base_fds_rank0}, others: (n-1) + 3 + "
             f"{model.base_fds_worker}; since the ring rank 0: 2(n-1) + 3 + {model.base_fds_rank0}, others: (n-1) + 4 + "
             f"{model.base_fds_worker} (exact) | data mesh, control star, heartbeats, store; the rest is Python's and the "
             "runtime's eventfds |"),
             (f"| dead rank (SIGKILL) | {fmt_s(model.crash_detect_s)} at 2 ranks (median of its jobs); here {fmt_s(model.crash_lab[0])} + "
             f"{fmt_s(model.crash_lab[1])} (n-1) | slowest survivor; every survivor holds a socket to the dead rank and "
             "sees it close; past 2 ranks the survivors queue for 2 cores (predictions: one rank per core) |"),
             ("| frozen rank (SIGSTOP) | TFRING_PEER_TIMEOUT_S + at most one heartbeat interval (exact from the code: "
              "in these runs rank 0 judged a peer silent for the timeout and relayed the verdict to the n-2 others; "
              "since the ring, the frozen rank's two neighbours judge it and the verdict is passed on around the ring "
              "both ways, n/2 hops of a message each) | measured with a 2 s timeout: see the frozen-rank table |"),
             *data_rows(local_bw, hosts),
             "", "**Assumptions of the predictions**\n"]
    why = {
        "hop_s": "one network hop between hosts, kernel to kernel (issue 31's figure)",
        "store_cores": "cores of the store's host serving requests in parallel (a thread per client today)",
        "handshake_round_trips": "a connection: TCP connect, the HMAC challenge/response, the hello",
        "peer_timeout_s": "TFRING_PEER_TIMEOUT_S's default",
        "ulimit_fds": "the default soft `ulimit -n`",
        "tree_fanout": "the redesign's tree that spreads verdicts (its neighbours are connections)",
        "tensors_per_step": "the probe's step (one bit each in the redesign's readiness vector)",
    }
    for key, reason in why.items():
        lines.append(f"- `{key}` = {getattr(a, key)}: {reason}.")
    lines += [
        ("- One rank per core, one process per rank; per-message CPU costs are the ones fitted here (upper bounds: "
        "measured with N ranks sharing 2 cores)."),
        ("- Linear terms stay linear past the sizes measured (the structure is read from the code: one response per "
        "rank per cycle, one socket per peer, one heartbeat per peer)."),
        ("- Today's init is bounded below by the largest of: the store's work (all requests / store cores), the last "
        "rank's chain (2(n-1) store reads and n-1 connections one after another) and rank 0's single acceptor "
        "(3(n-1) handshakes); plus what does not grow with n: `init()` at 2 ranks measured here "
        f"({fmt_s(model.init_fixed_s)})."),
        ("- The redesign (none of it exists): readiness bit-vectors combined by a recursive-doubling allreduce "
         "(log2 n messages per rank per cycle, Horovod's bit-vector allreduce); each "
        "rank watched by its ring successor, verdicts down the tree; connections only to ring neighbours, "
        "recursive-doubling partners and tree neighbours; each rank reads only its partners' addresses; recursive "
        "doubling (log2 n steps, +2 off a power of two) for small tensors."),
        ""]
    return lines


def prediction_table(model):
    keys = [("init_s", "init", fmt_s), ("store_requests", "store requests", fmt_n),
            ("rank0_control_messages_per_step", "rank 0 msgs / cached step", fmt_n),
            ("rank0_control_bytes_per_step", "rank 0 bytes / cached step", fmt_n),
            ("rank0_cpu_s_per_step", "rank 0 CPU / cached step", fmt_s),
            ("rank0_fds", "rank 0 fds", fmt_n), ("worker_fds", "other ranks' fds", fmt_n),
            ("latency_8b_s", "8 B allreduce (30 us hops)", fmt_s),
            ("heartbeat_rank0_frames_per_s", "heartbeat frames/s at rank 0", fmt_n),
            ("heartbeat_rank0_cpu_share", "heartbeat CPU at rank 0 (cores)", lambda v: f"{v:.3f}"),
            ("crash_detect_s", "killed rank named (all survivors)", fmt_s),
            ("freeze_detect_s", "frozen rank named", fmt_s)]
    lines = ["**PREDICTIONS** (model.py; today's design / the redesign; nothing here was measured at these sizes)\n",
             "| quantity | " + " | ".join(str(n) for n in PREDICT) + " |", "|---|" + "---|" * len(PREDICT)]
    for key, label, f in keys:
        cells = [f"{f(model.today(n)[key])} / {f(model.redesign(n)[key])}" for n in PREDICT]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    lines += ["**Which limit a growing job hits first** (today's design, model; budget crossed at the size shown)\n",
              ("| limit | at 1,000 ranks today | budget | why that budget | today crosses it at | redesign at 1,000 "
              "| redesign crosses it at |"), "|---|---|---|---|---|---|---|"]
    for what, value, budget, why, at, new_value, new_at in model_lib.first_limit(model, 1000):
        f = fmt_n if "descriptors" in what else (lambda v: f"{v:.3f} cores" if v < 1 else f"{v:.1f}") \
            if "heartbeat" in what else fmt_s
        lines.append(f"| {what} | {f(value)} | {f(budget)} | {why} | {at or 'never (to 1 M)'} ranks | {f(new_value)} "
                     f"| {new_at or 'never (to 1 M)'} |")
    lines.append("")
    return lines


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


def plots(local, model):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    os.makedirs(IMAGES, exist_ok=True)
    measured_n = sorted({r["np"] for r in local["results"]})
    lab_n = list(range(2, max(measured_n) + 1))
    pred_n = [2 ** k for k in range(1, 13)]
    specs = [
        ("init", "init() of the slowest rank", "seconds", [("init_call_s", "off", "measured, TCP")],
         "init_call_s", "init_s", None),
        ("control_messages", "rank 0's control messages per cached step", "messages",
         [("rank0_control_messages_per_step", "off", "measured, TCP"),
          ("rank0_control_messages_per_step", "on", "measured, shm")], None, "rank0_control_messages_per_step", None),
        ("control_bytes", "rank 0's control bytes per cached step", "bytes",
         [("rank0_control_bytes_per_step", "off", "measured, TCP")], None, "rank0_control_bytes_per_step", None),
        ("rank0_cpu", "rank 0's CPU per cached 150-tensor step", "seconds",
         [("rank0_cpu_s_per_step", "off", "measured, TCP")], "rank0_cpu_s_per_step", "rank0_cpu_s_per_step", None),
        ("fds", "rank 0's open descriptors", "descriptors",
         [("rank0_fds", "off", "measured, TCP"), ("rank0_fds", "on", "measured, shm")], None, "rank0_fds",
         (model.assumptions.ulimit_fds, "ulimit -n 1024")),
        ("latency", "8-byte allreduce", "seconds",
         [("latency_8b_s", "off", "measured, TCP (this host)"), ("latency_8b_s", "on", "measured, shm (this host)")],
         "latency_8b_s", "latency_8b_s", None),
        ("heartbeat", "heartbeat bytes sent per second at rank 0", "bytes/s",
         [("heartbeat_rank0_bytes_sent_per_s", "off", "measured (ss), TCP")], None, "heartbeat_rank0_bytes_per_s", None),
        ("dead_rank", "a SIGKILLed rank named by every survivor", "seconds",
         [("kill", "off", "measured, TCP (slowest survivor)")], "crash_detect_s", "crash_detect_s", None),
    ]
    written = []
    for name, title, unit, measured, lab_key, pred_key, hline in specs:
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for key, shm, label in measured:
            xs, ys = _points(local, key, shm)
            if xs:
                ax.scatter(xs, ys, s=14, label=label, zorder=3)
        if lab_key:
            ax.plot(lab_n, [model.lab(n)[lab_key] for n in lab_n], "k:", label="fit (this host)")
        factor = 0.5 if pred_key == "heartbeat_rank0_bytes_per_s" else 1.0  # sent only
        ax.plot(pred_n, [model.today(n)[pred_key] * factor for n in pred_n], "C3-",
                label="today's design, one rank per core (PREDICTION)")
        ax.plot(pred_n, [model.redesign(n)[pred_key] * factor for n in pred_n], "C2--",
                label="redesign, one rank per core (PREDICTION)")
        if hline:
            ax.axhline(hline[0], color="grey", lw=0.8)
            ax.text(2, hline[0] * 1.1, hline[1], fontsize=8, color="grey")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("ranks")
        ax.set_ylabel(unit)
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7)
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
        raise SystemExit("no docs/benchmarks/scale_local.json: run benchmarks/scale/run.py --sizes ... first")
    faults = load_json("local_faults")
    # the fault-only jobs add dead-rank samples (their rows have no other runs)
    model = model_lib.Model.fit({**local, "results": local["results"] + (faults or {}).get("results", [])}, store)
    lines = [BEGIN, "", "### Measured: many ranks on one host", ""]
    lines += local_tables(local)
    lines += fault_tables([local, faults])
    for payload, how in ((hosts, "shared memory between the ranks of a host (default)"),
                         (load_json("hosts_tcp"), "TCP only (`TFRING_SHM=0`)")):
        if payload:
            lines += [f"### Measured: emulated hosts, {how}", ""]
            lines += hosts_table(payload)
    lines += ["### The model", ""]
    lines += model_tables(model, store, load_json("local_bw"), (hosts, load_json("hosts_tcp")))
    lines += prediction_table(model)
    images = plots(local, model) if draw else []
    if images is None:
        print("matplotlib is not installed: tables written, the plots already there kept", file=sys.stderr)
        images = [(None, os.path.basename(p)[len("scale_"):-len(".png")].replace("_", " "), p)
                  for p in sorted(glob.glob(os.path.join(IMAGES, "scale_*.png")))]
    if images:
        lines += ["### Plots (measured points, the fit on this host, both designs predicted)", ""]
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
                   "today": {n: model.today(n) for n in PREDICT}, "redesign": {n: model.redesign(n) for n in PREDICT}},
                  f, indent=1)
    print(f"wrote {os.path.relpath(DOC, ROOT)} and docs/benchmarks/scale_model.json")


if __name__ == "__main__":
    main()
