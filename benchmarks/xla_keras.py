"""Keras MLP `fit` with tfring at np=2: the step compiled with XLA (jit_compile=True) against
the same without XLA and against plain Keras without tfring in the same processes (the
in-process ceiling), and where XLA schedules the gradient allreduces in a compiled step.

Per launch, each rank builds three models from the same seed (keras_models.py's mlp, batch
128 per rank) and alternates whole `fit` calls of STEPS steps: `xla` (DistributedOptimizer,
jit_compile=True), `noxla` (DistributedOptimizer, jit_compile=False), `plain` (Keras' SGD,
no collectives). Samples/s per rank = BATCH x STEPS / fit time, median over rounds; the job
goes at its slowest rank's pace, so a launch reports the minimum over ranks.
Ceiling = np x the slowest rank's plain rate (ARCHITECTURE.md section 4 explains why not a
plain pair). XLA does not pay on this CPU even for plain Keras; this measures what tfring's
lowerings cost, not a speed-up.

Schedule: rank 0 prints the optimized HLO order of a 5-layer MLP step with
DistributedGradientTape (buckets of 4 MiB: one per layer): how many allreduce starts XLA
placed before the last backward-pass dot, i.e. may overlap with the backward pass.

    tfringrun -np 2 python benchmarks/xla_keras.py [--rounds 4] [--steps 25]
"""

import argparse
import os
import re
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras_models


def _timed_fits(hvd, keras, rounds, steps, batch):
    x, y = keras_models.data("mlp", batch * steps, seed=hvd.rank())

    def make(distributed, jit):
        keras.utils.set_random_seed(0)
        model = keras_models.build("mlp")
        opt = keras.optimizers.SGD(0.01)
        model.compile(optimizer=hvd.DistributedOptimizer(opt) if distributed else opt,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=jit)
        model.fit(x[:batch * 2], y[:batch * 2], batch_size=batch, epochs=1, verbose=0)  # trace and compile
        return model

    models = {"xla": make(True, True), "noxla": make(True, False), "plain": make(False, False)}
    assert models["xla"].jit_compile is True
    rates = {k: [] for k in models}
    for _ in range(rounds):
        for k, model in models.items():
            t = time.perf_counter()
            model.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False)
            rates[k].append(batch * steps / (time.perf_counter() - t))
    return {k: statistics.median(v) for k, v in rates.items()}


def _schedule(hvd, keras, tf, np):
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((784,))] + [keras.layers.Dense(1024, activation="relu") for _ in range(4)] +
                             [keras.layers.Dense(10)])
    opt = keras.optimizers.SGD(0.01)
    opt.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(jit_compile=True)
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = hvd.DistributedGradientTape(tape).gradient(loss, model.trainable_variables)
        opt.apply(grads, model.trainable_variables)
        return loss

    x = tf.constant(np.random.rand(128, 784).astype(np.float32))
    y = tf.constant(np.random.randint(0, 10, 128))
    hlo = step.experimental_get_compiler_ir(x, y)(stage="optimized_hlo")
    lines = [line for line in hlo[hlo.index("ENTRY"):].splitlines() if "=" in line]
    starts = [i for i, line in enumerate(lines) if "tfring_collective_start" in line]
    dots = [i for i, line in enumerate(lines) if re.search(r"\bdot\(", line)]
    before = sum(1 for s in starts if s < dots[-1])
    return f"{before} of {len(starts)} allreduce starts before the last of {len(dots)} dots (forward + backward)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--batch", type=int, default=128)
    args = parser.parse_args()
    keras_models.threads(1)
    import keras
    import numpy as np
    import tensorflow as tf

    import tfring.keras as hvd
    import tfring.tensorflow as htf

    hvd.init()
    rates = _timed_fits(hvd, keras, args.rounds, args.steps, args.batch)
    gathered = htf.allgather(tf.constant([[rates["xla"], rates["noxla"], rates["plain"]]]), name="xla_keras.rates")
    slowest = np.min(gathered.numpy(), axis=0)
    if hvd.rank() == 0:
        xla, noxla, plain = slowest
        ceiling = hvd.size() * plain
        print(f"RESULT np={hvd.size()} samples/s: xla={hvd.size() * xla:.0f} noxla={hvd.size() * noxla:.0f} "
              f"ceiling={ceiling:.0f}; xla/noxla={xla / noxla:.2f} xla/ceiling={hvd.size() * xla / ceiling:.2f}",
              flush=True)
        print("SCHEDULE", _schedule(htf, keras, tf, np), flush=True)
    htf.barrier()


if __name__ == "__main__":
    main()
