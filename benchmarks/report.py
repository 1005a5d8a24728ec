"""Regenerates the measured tables and plots of docs/benchmarks.md from the JSON files the
benchmarks wrote into lab/results/. One command:

    python benchmarks/report.py

Only the part between the GENERATED markers of docs/benchmarks.md is rewritten.
"""

import glob
import json
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DATA = os.path.join(ROOT, "lab", "results")
DOC = os.path.join(ROOT, "docs", "benchmarks.md")
BEGIN, END = "<!-- GENERATED: benchmarks/report.py -->", "<!-- END GENERATED -->"


def human(nbytes):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def allreduce_section():
    runs = {}
    for path in sorted(glob.glob(os.path.join(DATA, "allreduce_np*_*.json"))):
        data = _read_json(path)
        runs.setdefault(data["np"], {})[data["implementation"]] = data
    lines = []
    for n, impls in sorted(runs.items()):
        order = [i for i in ("tfring", "openmpi", "gloo") if i in impls] + sorted(set(impls) - {"tfring", "openmpi", "gloo"})
        first = impls[order[0]]
        lines.append(f"### Allreduce, float32 sum, np={n}, median of {first.get('runs', 1)} runs "
                     f"({first.get('date', 'undated')})\n")
        lines.append("Each implementation's runs alternate with the others'; ranges in brackets.\n")
        lines.append("| size | " + " | ".join(f"{i} latency | {i} busbw" for i in order) + " |")
        lines.append("|---|" + "---|---|" * len(order))
        sizes = [r["bytes"] for r in impls[order[0]]["results"]]
        for s in sizes:
            cells = []
            for i in order:
                row = next((r for r in impls[i]["results"] if r["bytes"] == s), None)
                if row and "min_us" in row:
                    cells += [f"{row['median_us']:.1f} us ({row['min_us']:.1f}-{row['max_us']:.1f})",
                              f"{row['busbw_GBps']:.2f} GB/s ({row['busbw_min_GBps']:.2f}-{row['busbw_max_GBps']:.2f})"]
                else:
                    cells += [f"{row['median_us']:.1f} us", f"{row['busbw_GBps']:.2f} GB/s"] if row else ["-", "-"]
            lines.append(f"| {human(s)} | " + " | ".join(cells) + " |")
        lines.append("")
        png = plot(n, impls, order)
        if png:
            lines.append(f"![busbw vs size, np={n}](../lab/results/{os.path.basename(png)})\n")
    return "\n".join(lines)


def plot(n, impls, order):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    for i in order:
        rows = impls[i]["results"]
        ax.plot([r["bytes"] for r in rows], [r["busbw_GBps"] for r in rows], marker="o", label=i)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(f"float32 allreduce, np={n}, 2-core VM")
    ax.grid(True, alpha=0.3)
    ax.legend()
    path = os.path.join(DATA, f"allreduce_busbw_np{n}.png")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def tf_latency_section():
    lines = []
    for path in sorted(glob.glob(os.path.join(DATA, "tf_latency_np*.json"))):
        data = _read_json(path)
        if "summary" not in data:
            continue
        lines.append(f"### Allreduce from a `tf.function`, float32 sum, np={data['np']}, median of {data['runs']} "
                     f"runs ({data['date']})\n")
        lines.append("Per call, ranges over the runs in brackets. `empty`: a `tf.function` returning its argument; "
                     "`argument`: allreduce of the argument (TF allocates the output); `produce`: `t * s`; "
                     "`produced`: allreduce of `t * s` (forwarded, in place, as gradients are); `numpy`: the NumPy "
                     "API into a preallocated output. *Alone* subtracts the same function without the allreduce, "
                     "within each run; busbw = bytes x 2(n-1)/n / that time.\n")
        lines.append("| size | empty | argument | produce | produced | numpy | allreduce alone: argument | "
                     "alone: produced | busbw argument / produced / numpy |")
        lines.append("|---|---|---|---|---|---|---|---|---|")

        def cell(c):
            return f"{c['median_us']:.0f} us ({c['min_us']:.0f}-{c['max_us']:.0f})"

        for r in data["summary"]:
            bw = (f"{r['argument_net']['busbw_GBps']:.2f} / {r['produced_net']['busbw_GBps']:.2f} / "
                  f"{r['numpy']['busbw_GBps']:.2f} GB/s" if r["bytes"] >= 1 << 20 else "")
            lines.append(f"| {human(r['bytes'])} | " + " | ".join(cell(r[v]) for v in
                         ("empty", "argument", "produce", "produced", "numpy", "argument_net", "produced_net"))
                         + f" | {bw} |")
        lines.append("")
    return "\n".join(lines)


def keras_section():
    path = os.path.join(DATA, "keras_synthetic.json")
    if not os.path.exists(path):
        return ""
    data = _read_json(path)
    rounds = data.get("rounds", 1)
    lines = [(f"### Keras `fit` weak scaling, np={data['np']}, {data['batch_per_worker']} samples per worker "
              f"and step, {data['steps']} timed steps, {rounds} alternating rounds ({data.get('date', '')})\n"),
             ("Medians over the rounds, ranges in brackets; each round's efficiency is against that round's "
              "single-process run.\n"),
             "| model | configuration | workers | samples/s | ms/step | weak-scaling efficiency |",
             "|---|---|---|---|---|---|"]
    for r in data.get("summary", []):
        eff = "" if r["efficiency_median"] is None else \
            f"{r['efficiency_median']:.1%} ({r['efficiency_min']:.1%}-{r['efficiency_max']:.1%})"
        lines.append(f"| {r['model']} ({r['parameters'] / 1e6:.2f} M params) | {r['mode']} | {r['workers']} | "
                     f"{r['samples_per_s_median']:.0f} ({r['samples_per_s_min']:.0f}-{r['samples_per_s_max']:.0f}) | "
                     f"{r['step_ms_median']:.2f} | {eff} |")
    for f in data.get("failures", []):
        lines.append(f"| {f['model']} | {f['mode']} | | failed: {f['error'][-160:].splitlines()[-1]} | | |")
    lines += ["", ("Where a step's communication time goes (`tfring.stats()` over the timed steps, per step and rank, "
                   "median over the rounds): the allreduce transport (the rings, with Average's scaling), the rest of "
                   "the execution (fusion copies), negotiation per tensor (enqueue until the coordinator's response "
                   "is here) and the part of it spent waiting for the slowest rank.\n"),
              ("| model | configuration | rank | transport ms | copies ms | negotiation ms/tensor | of which waiting "
               "for the slowest | collectives | tensors | bytes packed (copied) |"),
              "|---|---|---|---|---|---|---|---|---|---|"]
    for key in dict.fromkeys((r["model"], r["mode"]) for r in data["results"] if "breakdown_per_rank" in r):
        runs = [r["breakdown_per_rank"] for r in data["results"] if (r["model"], r["mode"]) == key
                and "breakdown_per_rank" in r]
        for rank in range(len(runs[0])):
            med = {k: statistics.median(run[rank][k] for run in runs) for k in runs[0][rank]}
            lines.append(f"| {key[0]} | {key[1]} | {rank} | {med['transport_ms']:.2f} | "
                         f"{med['copies_and_scaling_ms']:.2f} | {med['negotiation_per_tensor_ms']:.2f} | "
                         f"{med['wait_for_slowest_per_tensor_ms']:.2f} | {med['collectives']:.1f} | "
                         f"{med['tensors']:.0f} | {med['fusion_copied_bytes'] / 1e3:.0f} KB of "
                         f"{med['bytes_reduced'] / 1e6:.2f} MB |")
    lines.append("")
    return "\n".join(lines)


def overhead_section():
    path = os.path.join(DATA, "overhead.json")
    if not os.path.exists(path):
        return ""
    data = _read_json(path)
    lines = [(f"### DistributedOptimizer overhead at np=1 (batch {data['batch']}, {data['rounds']} alternating "
             f"rounds, {data.get('date', 'undated')})\n"),
             "| model | plain Keras ms/step | DistributedOptimizer ms/step | overhead |", "|---|---|---|---|"]
    for r in data["results"]:
        spread = (f" ({100 * r['overhead_min']:+.1f}% .. {100 * r['overhead_max']:+.1f}% over the rounds)"
                  if "overhead_min" in r else "")
        lines.append(f"| {r['model']} | {r['plain_median_step_ms']:.2f} | {r['tfring_median_step_ms']:.2f} | "
                     f"{100 * r['overhead']:+.1f}%{spread} |")
    lines.append("")
    return "\n".join(lines)


def negotiation_section():
    lines = []
    for path in sorted(glob.glob(os.path.join(DATA, "negotiation_np*.json"))):
        data = _read_json(path)
        lines.append(f"### Negotiation per step with and without the response cache, np={data['np']}\n")
        lines.append(f"Each step: K allreduces of {data['elements']} float32 submitted together through the "
                     f"NumPy API, then waited for; {data['steps']} steps per job, median of {data['rounds']} "
                     "jobs per configuration (`benchmarks/negotiation.py`).\n")
        lines.append("| configuration | tensors K | step time | control bytes sent per step, by rank | collectives per step |")
        lines.append("|---|---|---|---|---|")
        for row in data["results"]:
            by_rank = " / ".join(f"{b:.0f}" for b in row["control_bytes_per_step_by_rank"])
            colls = row.get("collectives_per_step")
            lines.append(f"| {row['config']} | {row['tensors']} | {row['median_step_us']:.0f} us | {by_rank} | "
                         f"{'' if colls is None else f'{colls:.1f}'} |")
        lines.append("")
    return "\n".join(lines)


RENDERED = ("allreduce_np", "tf_latency_np", "keras_synthetic", "overhead", "negotiation_np")
IN_RELIABILITY_MD = ("faults", "fuzz", "soak")  # tabled by hand in docs/reliability.md


def other_sections():
    lines = []
    for path in sorted(glob.glob(os.path.join(DATA, "*.json"))):
        name = os.path.basename(path)
        if name.startswith(RENDERED + IN_RELIABILITY_MD):
            continue
        lines.append(f"### {name}\n\n```json\n{_read_text(path).strip()}\n```\n")
    return "\n".join(lines)


def _read_text(path):
    with open(path) as f:
        return f.read()


def _read_json(path):
    return json.loads(_read_text(path))


def main():
    sections = [allreduce_section(), tf_latency_section(), keras_section(), overhead_section(), negotiation_section(),
                other_sections()]
    generated = BEGIN + "\n\n" + "\n".join(s for s in sections if s) + "\n" + END
    doc = _read_text(DOC) if os.path.exists(DOC) else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    head, _, rest = doc.partition(BEGIN)
    _, _, tail = rest.partition(END)
    with open(DOC, "w") as f:
        f.write(head + generated + tail)
    print("wrote", DOC)


if __name__ == "__main__":
    main()
