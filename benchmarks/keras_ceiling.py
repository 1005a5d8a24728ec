"""Keras MLP `fit` at np=2 against the job's own ceiling, timed in the same processes.

    python benchmarks/keras_ceiling.py --launches 8

Per launch (`tfringrun -np 2`, each rank bound to its core as tfringrun does by default),
every rank builds two models from the same seed (keras_models.py's mlp, SGD 0.01, batch 128
per rank, 1 intra-op + 1 inter-op thread; a warm-up fit of each first) and, for ROUNDS
rounds, alternates four whole `fit` calls of STEPS steps, all ranks starting each together
(a barrier before it):

  plain     Keras' own SGD, no collectives: the rank alone on its local half of the batch;
            NumPy arrays in, as the issue did (Keras feeds them through tf.data, autotuned)
  dist      hvd.DistributedOptimizer, gradients averaged over both ranks; NumPy arrays in
  plain_ds  the plain model on the same batches as a tf.data pipeline with autotuning off
  dist_ds   the distributed model on that pipeline

  plain rate of a rank = BATCH x STEPS / fit time, median over rounds;
  ceiling            = np x the slower rank's plain rate (a synchronous job goes at its
                       slowest rank's pace; ARCHITECTURE.md section 4: not a plain pair);
  dist rate          = np x BATCH x STEPS / the slower rank's dist fit time, median;
  ratio              = dist rate / ceiling (issue 40's definition);
  ratio_in_steps     = the same with each fit's time inside its steps (first batch begin
                       to last batch end) instead of the whole fit;
  ratio_no_autotune  = dist_ds against plain_ds, whole fits.

Every fit is also split into its set-up (before the first step), its steps and its tail
(after the last step until fit returns): with autotuning, tf.data's iterator teardown
holds a fit of this size 0.3-0.6 s after its last step (docs/benchmarks.md). A rank whose
plain fits ran above --full-above samples/s (default 5500) is `full`, else `half`; the
launch's mode is `full` (both), `half` (both) or `mixed` (the modes are that tail's, not
the steps'). Per fit the script records the CPU time of every thread (/proc/self/task/*/stat)
and, for distributed fits, the deltas of `tfring.stats()` (negotiation, wait for the slowest
rank, transfer, control messages, tensors). --timeline writes rank 0's timeline of the last
`dist` fit, --keep every rank's raw JSON with that fit's step times.

Writes lab/results/keras_ceiling.json (every launch, every fit) and prints a markdown table
per launch and per mode (docs/benchmarks.md, "Keras fit against the in-process ceiling").
TFRING_* variables in the environment reach the ranks (A/B: TFRING_CONTROL_HOLD_US=0 ...).
On a shared machine, --worker-prefix runs each rank under a command that favours it
(e.g. a script that writes -20 to /proc/self/autogroup, then execs its arguments).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import keras_models
from bench_common import cpu_delta, thread_cpu

STAT_KEYS = ("negotiation_seconds", "wait_for_slowest_seconds", "queue_seconds", "transfer_seconds",
             "execute_seconds", "tensors", "collectives", "control_messages_sent")


class StepTimes:
    """A Keras callback: (begin, end) of every step on the system-wide monotonic clock (the
    ranks' times compare; the timeline's 0 is `origin` on rank 0)."""

    def __init__(self):
        import keras

        self.callback = type("StepTimesCallback", (keras.callbacks.Callback,), {
            "on_train_batch_begin": lambda _, batch, logs=None: self.times.append([time.monotonic(), None]),
            "on_train_batch_end": lambda _, batch, logs=None: self.times[-1].__setitem__(1, time.monotonic()),
        })()
        self.times = []
        self.origin = None


def worker(args):
    keras_models.threads(1)
    import keras
    import numpy as np
    import tensorflow as tf

    import tfring
    import tfring.keras as hvd

    hvd.init()
    rank = hvd.rank()
    x, y = keras_models.data("mlp", args.batch * args.steps, seed=rank)

    def make(distributed, **options):
        keras.utils.set_random_seed(0)
        model = keras_models.build("mlp")
        opt = keras.optimizers.SGD(0.01)
        model.compile(optimizer=hvd.DistributedOptimizer(opt, **options) if distributed else opt,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(x[:args.batch * 2], y[:args.batch * 2], batch_size=args.batch, epochs=1, verbose=0)
        return model

    def no_autotune():  # the same batches as a tf.data pipeline that tf.data does not autotune
        options = tf.data.Options()
        options.autotune.enabled = False
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(args.batch).with_options(options)

    plain, dist = make(False), make(True)
    models = {"plain": plain, "dist": dist, "plain_ds": plain, "dist_ds": dist}
    if args.one_group:
        models["dist_one_group"] = make(True, bucket_bytes=0)
    fits, traced = [], None
    for r in range(args.rounds):
        for kind, model in models.items():
            data = {"x": no_autotune()} if kind.endswith("_ds") else {"x": x, "y": y, "batch_size": args.batch}
            steps = StepTimes()
            trace = kind == "dist" and r == args.rounds - 1  # the last distributed fit: its timeline
            if trace and args.timeline and rank == 0:
                steps.origin = time.monotonic()
                tfring.start_timeline(args.timeline)
            # every fit starts together on all ranks: a rank's wait for another's previous fit is
            # no part of this one
            tfring.allreduce(np.zeros(1, np.float32), name="keras_ceiling.start")
            stats0, cpu0, wall0 = tfring.stats(), thread_cpu(), time.monotonic()
            model.fit(**data, epochs=1, verbose=0, shuffle=False, callbacks=[steps.callback])
            end = time.monotonic()
            if trace and args.timeline and rank == 0:
                tfring.stop_timeline()
            if trace:
                traced = steps
            seconds = end - wall0
            threads, stats1 = cpu_delta(cpu0, thread_cpu()), tfring.stats()
            inside = sum(e - b for b, e in steps.times)
            fit = {"round": r, "kind": kind, "seconds": seconds, "rate": args.batch * args.steps / seconds,
                   # the fit's time inside its steps (batch begin to end) and outside them: before the
                   # first step (fit's set-up), between steps, after the last
                   "in_steps": round(inside, 4), "before_first": round(steps.times[0][0] - wall0, 4),
                   "after_last": round(end - steps.times[-1][1], 4),
                   "between": round(steps.times[-1][1] - steps.times[0][0] - inside, 4),
                   "cpu_threads": threads[:4], "cpu_process": round(sum(s for _, s in threads), 3)}
            if kind.startswith("dist"):
                fit["stats"] = {k: round(stats1[k] - stats0[k], 4) for k in STAT_KEYS}
            fits.append(fit)
    with open(os.path.join(args.out_dir, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "size": hvd.size(), "fits": fits, "affinity": sorted(os.sched_getaffinity(0)),
                   "steps": traced.times, "timeline_origin": traced.origin}, f)
    tfring.allreduce(np.zeros(1, np.float32), name="keras_ceiling.done")  # no rank leaves early


def summarize(ranks, full_above, steps, batch):
    """One launch's figures from every rank's fits."""
    size = len(ranks)
    kinds = sorted({f["kind"] for f in ranks[0]["fits"]})
    rounds = sorted({f["round"] for f in ranks[0]["fits"]})

    def fits(rank, kind):
        return [f for f in rank["fits"] if f["kind"] == kind]

    def own_rate(rank, kind, span="seconds"):  # one rank alone: median over rounds
        return statistics.median(batch * steps / f[span] for f in fits(rank, kind))

    def job_rate(kind, span="seconds"):  # the job's rate, median over rounds: the slower rank's fit
        return statistics.median(size * batch * steps / max(f[span] for r in ranks for f in fits(r, kind)
                                                            if f["round"] == rd) for rd in rounds)

    def ratio(dist_kind, plain_kind, span="seconds"):
        return job_rate(dist_kind, span) / (size * min(own_rate(r, plain_kind, span) for r in ranks))

    plain = [own_rate(r, "plain") for r in ranks]
    full = [p > full_above for p in plain]
    mode = "full" if all(full) else "half" if not any(full) else "mixed"
    detail = []
    for r, rate in zip(ranks, plain):
        dist_fits = fits(r, "dist")
        n = len(dist_fits) * steps  # distributed steps timed

        def ms(values, n=n):
            return round(1e3 * sum(values) / n, 2)

        d = {"rank": r["rank"], "plain": round(rate),
             "plain_step_ms": round(1e3 * batch / rate, 2),
             "dist_step_ms": round(1e3 * statistics.median(f["seconds"] for f in dist_fits) / steps, 2),
             "dist_in_step_ms": round(1e3 * statistics.median(f["in_steps"] for f in dist_fits) / steps, 2),
             "top_thread_cpu_ms_per_step": ms(f["cpu_threads"][0][1] for f in dist_fits),
             "process_cpu_ms_per_step": ms(f["cpu_process"] for f in dist_fits)}
        for key in ("negotiation_seconds", "wait_for_slowest_seconds", "queue_seconds", "transfer_seconds"):
            d[key.replace("_seconds", "_ms_per_step")] = ms(f["stats"][key] for f in dist_fits)
        for key in ("control_messages_sent", "tensors", "collectives"):
            d[key + "_per_step"] = round(sum(f["stats"][key] for f in dist_fits) / n, 2)
        detail.append(d)
    # fit()'s time after its last step (tf.data's autotuning thread; docs/benchmarks.md), per kind
    tail_ms = {k: round(1e3 * statistics.median(f["after_last"] for r in ranks for f in fits(r, k)), 1)
               for k in kinds}
    result = {"mode": mode, "plain": [round(p) for p in plain], "ceiling": round(size * min(plain)),
              "dist": round(job_rate("dist")), "ratio": round(ratio("dist", "plain"), 3),
              "ratio_in_steps": round(ratio("dist", "plain", "in_steps"), 3), "tail_ms": tail_ms, "ranks": detail}
    if "dist_ds" in kinds:
        result["ratio_no_autotune"] = round(ratio("dist_ds", "plain_ds"), 3)
        result["plain_no_autotune"] = [round(own_rate(r, "plain_ds")) for r in ranks]
    for kind in kinds:
        if kind not in ("plain", "dist", "plain_ds", "dist_ds"):
            result[f"ratio_{kind}"] = round(ratio(kind, "plain"), 3)
    return result


def launch(args, index):
    with tempfile.TemporaryDirectory(prefix="keras_ceiling.") as out_dir:
        env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", OMP_NUM_THREADS="1")
        cmd = [sys.executable, "-m", "tfring.runner.launch", "-np", str(args.np), *args.worker_prefix.split(),
               sys.executable,
               os.path.abspath(__file__), "--worker", "--out-dir", out_dir, "--rounds", str(args.rounds),
               "--steps", str(args.steps), "--batch", str(args.batch)] + (["--one-group"] if args.one_group else [])
        if args.timeline:
            cmd += ["--timeline", f"{args.timeline}.{index}"]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout, check=False)
        ranks = []
        for r in range(args.np):
            path = os.path.join(out_dir, f"rank{r}.json")
            if not os.path.exists(path):
                raise SystemExit(f"launch {index} failed (exit {out.returncode}):\n"
                                 f"{out.stdout[-1500:]}{out.stderr[-1500:]}")
            with open(path) as f:
                ranks.append(json.load(f))
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                with open(os.path.join(args.keep, f"launch{index}.rank{r}.json"), "w") as f:
                    json.dump(ranks[-1], f)
    result = summarize(ranks, args.full_above, args.steps, args.batch)
    result["launch"] = index
    result["fits"] = {r["rank"]: r["fits"] for r in ranks}
    return result


def table(launches):
    lines = [("| launch | mode | plain samples/s (rank 0, 1) | ceiling | distributed | distributed/ceiling "
              "| inside steps only | fit's tail after the last step, ms (plain, dist) "
              "| no tf.data autotuning: plain samples/s, distributed/ceiling |"),
             "|---|---|---|---|---|---|---|---|---|"]
    for x in launches:
        tail, plain_ds = x["tail_ms"], ", ".join(str(p) for p in x.get("plain_no_autotune", []))
        lines.append(f"| {x['launch']} | {x['mode']} | {', '.join(str(p) for p in x['plain'])} | {x['ceiling']} "
                     f"| {x['dist']} | **{x['ratio']:.2f}** | {x['ratio_in_steps']:.2f} "
                     f"| {tail['plain']:.0f}, {tail['dist']:.0f} "
                     f"| {plain_ds}; **{x.get('ratio_no_autotune', float('nan')):.2f}** |")
    lines += ["", ("| mode | launches | distributed/ceiling, median (range) | inside steps only "
                   "| no tf.data autotuning |"), "|---|---|---|---|---|"]

    def spread(values):
        values = [v for v in values if v is not None]
        return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})" if values else "-"

    for mode in ("full", "half", "mixed", "all"):
        chosen = [x for x in launches if mode in ("all", x["mode"])]
        if chosen:
            lines.append(f"| {mode} | {len(chosen)} | **{spread(x['ratio'] for x in chosen)}** "
                         f"| {spread(x['ratio_in_steps'] for x in chosen)} "
                         f"| {spread(x.get('ratio_no_autotune') for x in chosen)} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--full-above", type=float, default=5500,
                        help="plain samples/s of one rank above which it ran at full speed")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--output", default=os.path.join(ROOT, "lab", "results", "keras_ceiling.json"))
    parser.add_argument("--one-group", action="store_true",
                        help="also alternate a third model, dist_one_group: DistributedOptimizer(bucket_bytes=0), "
                             "every gradient in one negotiation at the end of the backward pass")
    parser.add_argument("--worker-prefix", default="",
                        help="a command each rank's python runs under (split on spaces; e.g. a script that raises "
                             "its scheduling priority on a shared machine)")
    parser.add_argument("--timeline", help="rank 0 writes a timeline of the last distributed fit here")
    parser.add_argument("--keep", help="copy every rank's raw JSON (fits, step times) into this folder")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    launches = []
    for i in range(1, args.launches + 1):
        x = launch(args, i)
        launches.append(x)
        print(f"launch {i}: mode {x['mode']} plain {x['plain']} ceiling {x['ceiling']} dist {x['dist']} "
              f"ratio {x['ratio']:.2f} in steps {x['ratio_in_steps']:.2f} no autotune "
              f"{x.get('ratio_no_autotune')} tail ms {x['tail_ms']}", flush=True)
    env = {k: v for k, v in os.environ.items() if k.startswith("TFRING_")}
    with open(args.output, "w") as f:
        json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "args": vars(args), "env": env,
                   "launches": launches}, f, indent=1)
    print(table(launches))
    print(f"wrote {args.output}")
    return None


if __name__ == "__main__":
    main()
