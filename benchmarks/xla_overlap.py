"""Per-step overlap of tfring's gradient allreduces with the backward pass in XLA-compiled
Keras steps (jit_compile=True, DistributedOptimizer, 4 MiB buckets), at np=2, on rank 0.

Two timelines of the same timed `fit`, both on rank 0:

* XLA's own thunk trace (TF profiler, `tf.profiler.experimental.start`): XLA:CPU traces
  every thunk it executes (dot, fusion, copy, tfring's start and done custom calls) and an
  `end: <name>` mark when the thunk's event completes; for tfring's done call that is when
  the collective's completion fulfilled its future. The numbers below come from it
  (tools/xla_trace.py's xla_overlap_per_step defines them): per step, `overlap_backward` = wall time
  in which XLA ran a backward-pass compute thunk (one that began before the step's last
  start call) while at least one gradient bucket was in flight (its start call began, its
  done's future not yet fulfilled); `overlap` = the same with any compute thunk (the
  optimizer's updates of buckets already reduced, too); `in_flight`; `exposed` =
  in_flight - overlap; `step` = the execution's wall time.
* tfring's timeline (docs/monitoring.md): XLA_START / XLA_IN_FLIGHT / XLA_DONE per start/done
  pair (cc/tf/xla/inflight.cc) beside the core's NEGOTIATE / ALLREDUCE spans; reported as
  `tfring_timeline` (overlap_per_step), and what tests/test_xla_overlap.py checks. The
  readers of both are tools/xla_trace.py's, shared with that test.

What XLA:CPU does (seen in the thunk trace): it runs thunks in its schedule's order on one
thread; a done call returns its future at once and XLA continues; a thunk that depends on a
pending done (including through reused buffers) waits for it, and the rest of the program
then may resume on the thread that fulfilled the future.

    tfringrun -np 2 python benchmarks/xla_overlap.py [--models mlp,cnn] [--steps 30]
"""

import argparse
import glob
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import keras_models

from tools.xla_trace import hlo_order, overlap_per_step, xla_overlap_per_step, xla_thunks

RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lab", "results")


def _summary(rows, key):
    values = [r[key] for r in rows]
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def measure(hvd, htf, keras, tf, name, steps_n, batch, tmp):
    keras.utils.set_random_seed(0)
    x, y = keras_models.data(name, batch * steps_n, seed=hvd.rank())
    model = keras_models.build(name)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.01)), loss=loss_fn, jit_compile=True)
    model.fit(x[:batch * 3], y[:batch * 3], batch_size=batch, epochs=1, verbose=0)  # trace, compile, warm up
    assert model.jit_compile is True
    timer = keras_models.step_timer(warmup_steps=1)
    timeline = os.path.join(tmp, f"{name}.json")
    profile = os.path.join(tmp, f"{name}.rank{hvd.rank()}")
    hvd.start_timeline(timeline)
    tf.profiler.experimental.start(profile)
    t = time.perf_counter()
    model.fit(x, y, batch_size=batch, epochs=1, verbose=0, shuffle=False, callbacks=[timer])
    elapsed = time.perf_counter() - t
    tf.profiler.experimental.stop()
    hvd.stop_timeline()
    htf.barrier()
    if hvd.rank() != 0:
        return None
    with open(timeline) as f:
        timeline_rows = overlap_per_step(json.load(f))
    xspace = glob.glob(os.path.join(profile, "**", "*.xplane.pb"), recursive=True)[0]
    rows = xla_overlap_per_step(xla_thunks(xspace), "DistributedOptimizer_")[1:]  # the first: profiler start-up
    order = hlo_order(tf, model, loss_fn, tf.constant(x[:batch]), tf.constant(y[:batch]))
    return {"model": name, "np": hvd.size(), "batch_per_rank": batch, "steps_timed": len(rows),
            "fit_s": elapsed, "keras_step_ms": _summary([{"v": 1e3 * s} for s in timer.times], "v"),
            **{key: _summary(rows, key) for key in ("step_ms", "compute_ms", "overlap_backward_ms", "overlap_ms", "in_flight_ms",
                                                   "exposed_ms", "backward_after_first_start_ms", "last_start_wait_ms")},
            "buckets": rows[0]["buckets"] if rows else 0, "hlo": order, "per_step": rows,
            "tfring_timeline": {key: _summary(timeline_rows, key) for key in (
                "start_window_ms", "in_flight_before_last_start_ms", "executing_before_last_start_ms")}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mlp")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--out", default=os.path.join(RESULTS, "xla_overlap.json"))
    args = parser.parse_args()
    keras_models.threads(1)
    import keras
    import tensorflow as tf

    import tfring.keras as hvd
    import tfring.tensorflow as htf

    hvd.init()
    results = []
    with tempfile.TemporaryDirectory(prefix="xla_overlap_") as tmp:
        for name in args.models.split(","):
            r = measure(hvd, htf, keras, tf, name, args.steps, args.batch, tmp)
            if r:
                results.append(r)
                f = {k: r[k]["median"] for k in ("step_ms", "compute_ms", "overlap_backward_ms", "overlap_ms",
                                                 "in_flight_ms", "exposed_ms")}
                print(f"RESULT {name} np={r['np']} buckets={r['buckets']} steps={r['steps_timed']}: step "
                      f"{f['step_ms']:.1f} ms (XLA compute {f['compute_ms']:.1f}), overlap with backward "
                      f"{f['overlap_backward_ms']:.2f} ms ({r['overlap_backward_ms']['min']:.2f}-"
                      f"{r['overlap_backward_ms']['max']:.2f}), with any compute {f['overlap_ms']:.2f} ms "
                      f"({r['overlap_ms']['min']:.2f}-{r['overlap_ms']['max']:.2f}), in flight {f['in_flight_ms']:.2f}, "
                      f"exposed {f['exposed_ms']:.2f} ms; hlo {r['hlo']}", flush=True)
            htf.barrier()
    if hvd.rank() == 0:
        with open(args.out, "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()), "results": results}, f, indent=1)
        print("wrote", args.out)


if __name__ == "__main__":
    main()
