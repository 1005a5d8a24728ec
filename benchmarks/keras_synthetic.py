"""Keras 3 `fit` throughput on random data: weak scaling of tfring against plain Keras.

One command runs every configuration in turn and writes lab/results/keras_synthetic.json:

    python benchmarks/keras_synthetic.py --compare [--np 2] [--models mlp cnn]

Configurations (every process: 1 intra-op + 1 inter-op thread, BATCH samples per worker and
step, the same number of timed steps; see keras_models.py for the models):

  single     plain Keras in one process, no tfring: the baseline
  tfring     tfringrun -np N, hvd.DistributedOptimizer (per-worker batch BATCH)
  strategy   tfringrun -np N, tfring.RingStrategy (global batch N x BATCH)
  mwms       N processes of TF's MultiWorkerMirroredStrategy with a TF_CONFIG each (global
             batch N x BATCH); only with --mwms, see run_mwms for what Keras 3 needs

Weak-scaling efficiency = (global samples/s at N) / (N x samples/s of `single`): 100% means
N workers do N times the work per second of one.

One configuration by hand (prints one RESULT line on rank 0):
    tfringrun -np 2 python benchmarks/keras_synthetic.py --mode tfring --model mlp
"""

import argparse
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import keras_models

MODES = ("single", "tfring", "strategy", "mwms")


# ---------------------------------------------------------------------------- one process


def _fit(model, x, y, batch, steps, warmup, *callbacks):
    timer = keras_models.step_timer(warmup)
    model.fit(x, y, batch_size=batch, epochs=1, steps_per_epoch=steps + warmup, shuffle=False,
              verbose=0, callbacks=[timer, *callbacks])
    return timer


class _StatsWindow:
    """tfring.stats() at the end of the warm-up steps and at the end of training: the
    per-step breakdown of where a step's communication time went (see ``breakdown``)."""

    def __init__(self, warmup_steps):
        import keras

        import tfring

        window = self

        class Callback(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                window.seen += 1
                if window.seen == warmup_steps:
                    window.before = tfring.stats()

            def on_train_end(self, logs=None):
                window.after = tfring.stats()

        self.seen, self.before, self.after = 0, None, None
        self.callback = Callback()

    def breakdown(self, steps):
        """Per step, on this rank (ms unless named): the allreduce transport (ring), fusion
        copies and scaling (execute - transport), negotiation per tensor (enqueue -> the
        response is here), of which waiting for the slowest rank, and the counts."""
        import numpy as np

        import tfring

        d = {k: (self.after[k] - self.before[k]) / steps for k in self.after
             if isinstance(self.after[k], (int, float)) and k != "size"}
        tensors = max(d["tensors"], 1e-9)
        mine = np.array([d["allreduce_transfer_seconds"] * 1e3, (d["execute_seconds"] - d["transfer_seconds"]) * 1e3,
                         d["negotiation_seconds"] / tensors * 1e3, d["wait_for_slowest_seconds"] / tensors * 1e3,
                         d["collectives"], d["tensors"], d["fusion_copied_bytes"], d["bytes_reduced"]], np.float64)
        every = tfring.allgather(mine[None, :], name="bench.breakdown")
        keys = ("transport_ms", "copies_and_scaling_ms", "negotiation_per_tensor_ms", "wait_for_slowest_per_tensor_ms",
                "collectives", "tensors", "fusion_copied_bytes", "bytes_reduced")
        return [dict(zip(keys, (round(float(v), 4) for v in row))) for row in every]


def _report(args, workers, global_batch, timer, model, extra=None):
    sec = timer.seconds_per_step()
    result = {"mode": args.mode, "model": args.model, "workers": workers, "batch_per_worker": args.batch,
              "global_batch": global_batch, "timed_steps": len(timer.times), "median_step_s": sec,
              "samples_per_s": global_batch / sec, "parameters": keras_models.parameter_count(model),
              **(extra or {})}
    print("RESULT " + json.dumps(result), flush=True)


def run_worker(args):
    """Runs one configuration in this process (one rank of it)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    keras_models.threads(1)
    import keras

    steps, warmup = args.steps, args.warmup
    if args.mode == "single":
        model = keras_models.build(args.model)
        model.compile(optimizer=keras.optimizers.SGD(0.01), loss=_loss())
        x, y = keras_models.data(args.model, args.batch * (steps + warmup))
        timer = _fit(model, x, y, args.batch, steps, warmup)
        _report(args, 1, args.batch, timer, model)
    elif args.mode == "tfring":
        import tfring.keras as hvd

        hvd.init()
        model = keras_models.build(args.model)
        optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(0.01), bucket_bytes=args.bucket_bytes)
        model.compile(optimizer=optimizer, loss=_loss())
        x, y = keras_models.data(args.model, args.batch * (steps + warmup), seed=hvd.rank())
        window = _StatsWindow(warmup)
        timer = _fit(model, x, y, args.batch, steps, warmup, window.callback)
        breakdown = window.breakdown(steps)
        if hvd.rank() == 0:
            _report(args, hvd.size(), args.batch * hvd.size(), timer, model, {"breakdown_per_rank": breakdown})
    elif args.mode == "strategy":
        import tfring

        strategy = tfring.RingStrategy()
        n = strategy.num_replicas_in_sync
        with strategy.scope():
            model = keras_models.build(args.model)
            model.compile(optimizer=keras.optimizers.SGD(0.01), loss=_loss())
        x, y = keras_models.data(args.model, args.batch * n * (steps + warmup))
        window = _StatsWindow(warmup)
        timer = _fit(model, x, y, args.batch * n, steps, warmup, window.callback)
        breakdown = window.breakdown(steps)
        if tfring.rank() == 0:
            _report(args, n, args.batch * n, timer, model, {"breakdown_per_rank": breakdown})
    elif args.mode == "mwms":
        run_mwms(args, tf, keras)
    else:
        raise SystemExit(f"unknown mode {args.mode!r}")


def _loss():
    import keras

    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def run_mwms(args, tf, keras):
    """One worker of TF's MultiWorkerMirroredStrategy (TF_CONFIG set by the driver).

    Keras 3 does not support this strategy (keras-team/keras#20585). Three work-arounds make
    `fit` run: the input is a tf.data dataset with auto-sharding off (each worker makes its
    own data; the batch is the global one, as the strategy expects); the model's symbolic
    build, which Keras feeds with `strategy.reduce("MEAN", batch)` (refused for a PerReplica
    of host data), is fed this worker's batch instead; and the step logs stay per worker
    (Keras reduces scalar logs with `axis=0`, which fails). Gradients are still summed
    across workers by the strategy inside the optimizer, which is what is timed.
    """
    strategy = tf.distribute.MultiWorkerMirroredStrategy(
        communication_options=tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.RING))
    n = strategy.num_replicas_in_sync
    task = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    with strategy.scope():
        model = keras_models.build(args.model)
        model.compile(optimizer=keras.optimizers.SGD(0.01), loss=_loss())
    _patch_symbolic_build(model, strategy, tf)
    from keras.src.backend.tensorflow import trainer as keras_tf_trainer

    keras_tf_trainer._collective_all_reduce_multi_worker = lambda strategy: False
    x, y = keras_models.data(args.model, args.batch * (args.steps + args.warmup), seed=task)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(args.batch * n).with_options(options)
    dataset = dataset.repeat()
    timer = keras_models.step_timer(args.warmup)
    model.fit(dataset, epochs=1, steps_per_epoch=args.steps + args.warmup, verbose=0, callbacks=[timer])
    # Workers trained on different data: equal weights prove the gradients were all-reduced.
    print(f"WEIGHTS {sum(float(abs(w.numpy()).sum()) for w in model.trainable_weights):.6e}", flush=True)
    if task == 0:
        _report(args, n, args.batch * n, timer, model)


def _patch_symbolic_build(model, strategy, tf):
    def local(value):
        if isinstance(value, tf.distribute.DistributedValues):
            return strategy.experimental_local_results(value)[0]
        return value

    def maybe_symbolic_build(iterator=None, data_batch=None):
        if iterator is not None:
            for _, _, it in iterator:
                data_batch = tf.nest.map_structure(local, next(it))
                break
        with strategy.scope():
            model._symbolic_build(data_batch=data_batch)

    model._maybe_symbolic_build = maybe_symbolic_build


# ---------------------------------------------------------------------------- the driver


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker_args(args, mode, model):
    return [sys.executable, os.path.abspath(__file__), "--mode", mode, "--model", model, "--batch",
            str(args.batch), "--steps", str(args.steps), "--warmup", str(args.warmup)]


def _results(text):
    return [json.loads(m.group(1)) for m in re.finditer(r"RESULT (\{.*\})", text)]


def _run(cmd, env, timeout):
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    found = _results(proc.stdout)
    if proc.returncode != 0 or not found:
        tail = (proc.stdout + proc.stderr)[-3000:]
        return None, f"exit {proc.returncode}: {tail}"
    return found[0], None


def _run_mwms(args, model, env):
    ports = [_free_port() for _ in range(args.np)]
    workers = [f"127.0.0.1:{p}" for p in ports]
    procs = []
    for i in range(args.np):
        tf_config = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}})
        procs.append(subprocess.Popen(_worker_args(args, "mwms", model), env=dict(env, TF_CONFIG=tf_config),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = []
    deadline = time.monotonic() + args.timeout
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            return None, "timed out"
        outputs.append((p.returncode, out, err))
    found = _results(outputs[0][1])
    if any(rc != 0 for rc, _, _ in outputs) or not found:
        return None, "; ".join(f"worker {i} exit {rc}: {(out + err)[-1500:]}" for i, (rc, out, err) in enumerate(outputs))
    checksums = {re.search(r"WEIGHTS (\S+)", out).group(1) for _, out, _ in outputs}
    if len(checksums) != 1:
        return None, f"the workers' weights differ ({sorted(checksums)}): gradients were not all-reduced"
    return found[0], None


def compare(args):
    """Every configuration ``args.rounds`` times, alternating (round 1: single, tfring,
    strategy; round 2: the same; ...), so that the machine's drift between runs hits every
    configuration alike. Efficiency is computed within each round (against that round's
    single run); the summary gives medians and ranges over the rounds."""
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2")
    launcher = [sys.executable, "-m", "tfring.runner.launch", "-np", str(args.np)]
    rows, failures = [], []
    for round_index in range(args.rounds):
        for model in args.models:
            plan = [("single", _worker_args(args, "single", model)),
                    ("tfring", launcher + _worker_args(args, "tfring", model)),
                    ("strategy", launcher + _worker_args(args, "strategy", model))]
            if args.mwms:
                plan.append(("mwms", None))
            round_rows = []
            for mode, cmd in plan:
                print(f"--- round {round_index + 1}/{args.rounds}: {model} / {mode} ---", flush=True)
                result, error = _run_mwms(args, model, env) if mode == "mwms" else _run(cmd, env, args.timeout)
                if error:
                    print(f"    failed: {error[-600:]}", flush=True)
                    failures.append({"round": round_index, "model": model, "mode": mode, "error": error[-2000:]})
                    continue
                result["round"] = round_index
                round_rows.append(result)
                print(f"    {result['samples_per_s']:.0f} samples/s, {result['median_step_s'] * 1e3:.1f} ms/step", flush=True)
            base = next((b for b in round_rows if b["mode"] == "single"), None)
            for r in round_rows:
                if base:
                    r["weak_scaling_efficiency"] = r["samples_per_s"] / (r["workers"] * base["samples_per_s"])
            rows += round_rows
    summary = _summarize(rows)
    print(f"\n{'model':<5} {'mode':<9} {'workers':>7} {'samples/s (range)':>22} {'ms/step':>8} {'efficiency (range)':>22}")
    for r in summary:
        eff = "" if r["efficiency_median"] is None else \
            f"{r['efficiency_median']:.1%} ({r['efficiency_min']:.1%}-{r['efficiency_max']:.1%})"
        print(f"{r['model']:<5} {r['mode']:<9} {r['workers']:>7} "
              f"{r['samples_per_s_median']:>8.0f} ({r['samples_per_s_min']:.0f}-{r['samples_per_s_max']:.0f}) "
              f"{r['step_ms_median']:>8.2f} {eff:>22}")
    out = os.path.join(ROOT, "lab", "results", "keras_synthetic.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump({"host": platform.node(), "date": time.strftime("%Y-%m-%d"), "np": args.np,
                   "batch_per_worker": args.batch, "steps": args.steps, "warmup": args.warmup,
                   "rounds": args.rounds, "summary": summary, "results": rows, "failures": failures}, f, indent=1)
    print(f"wrote {out}")


def _summarize(rows):
    """Median and range over rounds of each (model, mode)."""
    out = []
    for key in dict.fromkeys((r["model"], r["mode"]) for r in rows):
        runs = [r for r in rows if (r["model"], r["mode"]) == key]
        sps = [r["samples_per_s"] for r in runs]
        effs = [r["weak_scaling_efficiency"] for r in runs if "weak_scaling_efficiency" in r]
        out.append({"model": key[0], "mode": key[1], "workers": runs[0]["workers"], "runs": len(runs),
                    "parameters": runs[0]["parameters"],
                    "samples_per_s_median": statistics.median(sps), "samples_per_s_min": min(sps),
                    "samples_per_s_max": max(sps),
                    "step_ms_median": statistics.median(r["median_step_s"] for r in runs) * 1e3,
                    "efficiency_median": statistics.median(effs) if effs else None,
                    "efficiency_min": min(effs) if effs else None, "efficiency_max": max(effs) if effs else None})
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", action="store_true", help="run every configuration, write the JSON")
    parser.add_argument("--mode", choices=MODES, help="run one configuration in this process")
    parser.add_argument("--model", choices=keras_models.MODELS, default="mlp")
    parser.add_argument("--models", nargs="+", choices=keras_models.MODELS, default=list(keras_models.MODELS))
    parser.add_argument("--np", type=int, default=2, help="workers (with --compare)")
    parser.add_argument("--batch", type=int, default=128, help="samples per worker and step (default 128)")
    parser.add_argument("--steps", type=int, default=40, help="timed steps (default 40)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed first steps (default 5)")
    parser.add_argument("--bucket-bytes", type=int, default=4 << 20,
                        help="DistributedOptimizer bucket_bytes in --mode tfring (0: one group)")
    parser.add_argument("--mwms", action="store_true", help="also run TF's MultiWorkerMirroredStrategy")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of every configuration (default 3)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per configuration")
    args = parser.parse_args()
    if args.compare:
        compare(args)
    elif args.mode:
        run_worker(args)
    else:
        parser.error("give --compare or --mode")


if __name__ == "__main__":
    main()
