"""Whole `fit()` calls across launches: what a user waits for, launch after launch.

Step medians inside `fit` (keras_synthetic.py) hide a launch that runs at half speed.
This times whole `fit()` calls instead: the MLP of keras_models.py (784-1024-1024-10, SGD
momentum), BATCH samples per worker and step, STEPS steps per call, a warm-up `fit` first
and then CALLS timed calls, in LAUNCHES separate launches of each configuration,
alternating:

  plain    one plain Keras process bound to CPU 0 (no tfring)
  tfring   tfringrun -np N, hvd.DistributedOptimizer + the broadcast callback

    python benchmarks/whole_fit.py [--launches 8] [--calls 5] [--np 2]

Prints one line per launch (samples/s of every call, global for tfring) and the spread:
the median launch and the slowest launch against it.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import keras_models


def worker(args):
    keras_models.threads(1)
    import keras

    callbacks, size, rank = [], 1, 0
    optimizer = keras.optimizers.SGD(0.01, momentum=0.9)
    if args.mode == "tfring":
        import tfring.keras as hvd

        hvd.init()
        size, rank = hvd.size(), hvd.rank()
        optimizer = hvd.DistributedOptimizer(optimizer)
        callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0)]
    x, y = keras_models.data("mlp", args.batch * args.steps, seed=rank)
    model = keras_models.build("mlp")
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=args.batch, epochs=1, verbose=0, callbacks=callbacks)  # warm-up
    rates = []
    for _ in range(args.calls):
        start = time.perf_counter()
        model.fit(x, y, batch_size=args.batch, epochs=1, verbose=0)
        rates.append(args.batch * args.steps * size / (time.perf_counter() - start))
    if rank == 0:
        print("CALLS " + " ".join(f"{r:.0f}" for r in rates), flush=True)


def launch(args, mode):
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2", OMP_NUM_THREADS="1")
    me = [sys.executable, os.path.abspath(__file__), "--worker", mode, "--calls", str(args.calls),
          "--steps", str(args.steps), "--batch", str(args.batch)]
    cmd = (["taskset", "-c", "0", *me] if mode == "plain"
           else [sys.executable, "-m", "tfring.runner.launch", "-np", str(args.np), *me])
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout, check=False)
    found = re.search(r"CALLS ([\d ]+)", out.stdout)
    if not found:
        raise SystemExit(f"{mode} launch failed (exit {out.returncode}):\n{out.stdout[-1500:]}{out.stderr[-1500:]}")
    return [float(v) for v in found.group(1).split()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=8)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=180)
    parser.add_argument("--worker", choices=["plain", "tfring"], dest="mode", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode:
        return worker(args)
    per_mode = {"plain": [], "tfring": []}
    for i in range(args.launches):
        for mode, medians in per_mode.items():
            rates = launch(args, mode)
            medians.append(statistics.median(rates))
            print(f"launch {i + 1} {mode:<6} " + " ".join(f"{r:.0f}" for r in rates), flush=True)
    for mode, medians in per_mode.items():
        mid = statistics.median(medians)
        print(f"{mode:<6} median launch {mid:.0f} samples/s, slowest {min(medians):.0f} "
              f"({min(medians) / mid:.0%} of the median), fastest {max(medians):.0f}")
    return None


if __name__ == "__main__":
    main()
