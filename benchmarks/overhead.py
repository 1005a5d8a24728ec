"""What tfring costs when there is nothing to communicate: Keras `fit` with
`hvd.DistributedOptimizer` in one process (np=1) against the same plain Keras step.

    python benchmarks/overhead.py [--models mlp cnn] [--rounds 5]

Both variants run in the same process, alternating round by round (plain, tfring, plain,
tfring, ...) so drifts of the machine hit both alike; each round is a fresh model and
`fit` of WARMUP + STEPS steps, timed per step after the warm-up (keras_models.step_timer).
Overhead, per round = median tfring step / median plain step - 1; reported: the median
over rounds and its range. Writes
lab/results/overhead.json.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras_models


def one_round(model_name, distributed, args):
    import keras

    import tfring.keras as hvd

    model = keras_models.build(model_name)
    optimizer = keras.optimizers.SGD(0.01)
    if distributed:
        optimizer = hvd.DistributedOptimizer(optimizer)
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y = keras_models.data(model_name, args.batch * (args.steps + args.warmup))
    timer = keras_models.step_timer(args.warmup)
    model.fit(x, y, batch_size=args.batch, epochs=1, shuffle=False, verbose=0, callbacks=[timer])
    return timer.times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=keras_models.MODELS, default=list(keras_models.MODELS))
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", default=os.path.join(ROOT, "lab", "results", "overhead.json"))
    args = parser.parse_args()

    keras_models.threads(1)
    import tfring.keras as hvd

    hvd.init()
    if hvd.size() != 1:
        raise SystemExit("overhead.py measures one process: run it without tfringrun")
    rows = []
    for name in args.models:
        plain, dist, per_round = [], [], []
        for _ in range(args.rounds):
            round_plain, round_dist = one_round(name, False, args), one_round(name, True, args)
            plain += round_plain
            dist += round_dist
            per_round.append(statistics.median(round_dist) / statistics.median(round_plain) - 1)
        p, d = statistics.median(plain), statistics.median(dist)
        rows.append({"model": name, "plain_median_step_ms": p * 1e3, "tfring_median_step_ms": d * 1e3,
                     "overhead": statistics.median(per_round), "overhead_min": min(per_round),
                     "overhead_max": max(per_round), "overhead_per_round": per_round,
                     "steps_per_variant": len(plain)})
        print(f"{name}: plain {p * 1e3:.2f} ms/step, DistributedOptimizer {d * 1e3:.2f} ms/step, overhead "
              f"{100 * statistics.median(per_round):+.1f}% (rounds {min(per_round):+.1%} .. {max(per_round):+.1%}; "
              f"{len(plain)} steps each)", flush=True)
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"host": platform.node(), "date": time.strftime("%Y-%m-%d"), "batch": args.batch,
                   "rounds": args.rounds, "results": rows}, f, indent=1)
    hvd.shutdown()


if __name__ == "__main__":
    main()
