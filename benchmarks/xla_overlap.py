"""Per-step overlap of tfring's gradient allreduces with the backward pass in XLA-compiled
Keras steps (jit_compile=True, DistributedOptimizer, 4 MiB buckets), at np=2, on rank 0.

Two timelines of the same timed `fit`, both on rank 0:

* XLA's own thunk trace (TF profiler, `tf.profiler.experimental.start`): XLA:CPU traces
  every thunk it executes (dot, fusion, copy, tfring's start and done custom calls) and an
  `end: <name>` mark when the thunk's event completes; for tfring's done call that is when
  the collective's completion fulfilled its future. The numbers below come from it
  (xla_overlap_per_step's docstring defines them): per step, `overlap_backward` = wall time
  in which XLA ran a backward-pass compute thunk (one that began before the step's last
  start call) while at least one gradient bucket was in flight (its start call began, its
  done's future not yet fulfilled); `overlap` = the same with any compute thunk (the
  optimizer's updates of buckets already reduced, too); `in_flight`; `exposed` =
  in_flight - overlap; `step` = the execution's wall time.
* tfring's timeline (docs/monitoring.md): XLA_START / XLA_IN_FLIGHT / XLA_DONE per start/done
  pair (cc/tf/xla/inflight.cc) beside the core's NEGOTIATE / ALLREDUCE spans; reported as
  `tfring_timeline` (overlap_per_step), and what tests/test_xla_overlap.py checks.

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
import re
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras_models

RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "lab", "results")


def _spans(events):
    """{name: [(row name, begin us, end us)]} of the timeline's complete spans."""
    rows = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    out = {}
    for e in events:
        if e.get("ph") == "X":
            out.setdefault(e["name"], []).append((rows.get(e["tid"], ""), e["ts"], e["ts"] + e["dur"]))
    return out


def _union(intervals, lo, hi):
    """Length of the union of `intervals` clipped to [lo, hi]."""
    total, reach = 0.0, lo
    for b, e in sorted((max(b, lo), min(e, hi)) for b, e in intervals):
        if b < e and e > reach:
            total += e - max(b, reach)
            reach = e
    return total


def steps(events):
    """The compiled steps of a timeline (list of JSON events): per step, the buckets in
    start order as dicts {name, start, submitted, completed, awaited, told} (us), and
    the core's ALLREDUCE spans [(begin, end)]."""
    spans = _spans(events)
    in_flight = {(r, b): e for r, b, e in spans.get("XLA_IN_FLIGHT", [])}
    done = {}
    for r, b, e in spans.get("XLA_DONE", []):
        done.setdefault(r, []).append((b, e))
    result, current = [], []
    for row, b, e in sorted(spans.get("XLA_START", []), key=lambda s: s[1]):
        if any(g["name"] == row for g in current):
            result.append(current)
            current = []
        later = [d for d in done.get(row, []) if d[0] >= b]
        awaited, told = min(later) if later else (None, None)
        current.append({"name": row, "start": b, "submitted": e, "completed": in_flight.get((row, b)),
                        "awaited": awaited, "told": told})
    if current:
        result.append(current)
    executing = [(b, e) for _, b, e in spans.get("ALLREDUCE", [])]
    return result, executing


def overlap_per_step(events):
    """tfring-timeline view per complete step (see steps()): dicts of ms. Upper bounds:
    the last start call can come later than the backward pass's last op (XLA:CPU may hold
    it back, see xla_overlap_per_step)."""
    all_steps, executing = steps(events)
    rows = []
    for k, step in enumerate(all_steps[:-1]):  # the last one has no next step to end it
        if len(step) != len(all_steps[0]) or any(g["completed"] is None for g in step):
            continue
        first, last_start = step[0]["start"], step[-1]["start"]
        in_flight = [(g["start"], g["completed"]) for g in step]
        rows.append({
            "buckets": len(step),
            "start_window_ms": (last_start - first) / 1e3,
            "in_flight_before_last_start_ms": _union(in_flight, first, last_start) / 1e3,
            "executing_before_last_start_ms": _union(executing, first, last_start) / 1e3,
            "step_ms": (all_steps[k + 1][0]["start"] - first) / 1e3,
        })
    return rows


BOOKKEEPING = ("ThunkExecutor::", "BlockUntilReady", "Memory", "CpuExecutable::")


def xla_thunks(xspace_path):
    """XLA:CPU's own thunk trace from a TF profiler capture (xplane.pb): per execution of a
    compiled program (CpuExecutable::ExecuteAsyncOnStream), its thunks as (name, begin ms,
    end ms, done ms): XLA traces each thunk's execution and an 'end: <name>' mark when its
    event completes (later than the execution for an asynchronous thunk, e.g. tfring's done
    call, whose future the collective's completion fulfils)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    with open(xspace_path, "rb") as f:
        space.ParseFromString(f.read())
    plane = next(p for p in space.planes if p.name == "/host:CPU")
    names = {k: m.name for k, m in plane.event_metadata.items()}
    events = sorted(((line.timestamp_ns + e.offset_ps / 1e3) / 1e6, e.duration_ps / 1e9, names[e.metadata_id])
                    for line in plane.lines for e in line.events)
    executions = [(t, t + d) for t, d, n in events if n == "CpuExecutable::ExecuteAsyncOnStream"]
    result = []
    for lo, hi in executions:
        inside = [(t, d, n) for t, d, n in events if lo <= t <= hi + 1e3]
        ends = {}
        for t, _, n in inside:
            if n.startswith("end: "):
                ends.setdefault(n[5:], t)
        result.append({"window": (lo, hi), "thunks": [(n, t, t + d, ends[n]) for t, d, n in inside
                                                      if n in ends and lo <= t <= hi and not n.startswith(BOOKKEEPING)]})
    return result


def xla_overlap_per_step(executions, tfring_prefix):
    """Per compiled step, from XLA's thunk trace (xla_thunks): thunks whose name starts with
    `tfring_prefix` are tfring's start/done calls (per bucket: first = start, second =
    done; XLA names them after the TF op), every other thunk is compute.

      overlap   = wall time during which XLA ran a compute thunk while at least one bucket
                  was in flight (its start call began, its done call's future not yet
                  fulfilled): computing and communicating at once.
      overlap_backward = the same, counting only compute thunks that began before the
                  step's last start call (whose operands are the backward pass's last
                  gradients): the backward pass beside the allreduces; the rest of
                  `overlap` is the optimizer's updates of earlier buckets.
      in_flight = wall time with at least one bucket in flight.
      exposed   = in_flight - overlap: communication XLA did not compute beside.
      backward_after_first_start = compute thunks between the first and the last start call.
      last_start_wait = the last start call's begin - the end of the last compute thunk
                  before it: how long XLA held the last bucket's start back (waiting on an
                  earlier bucket's done, not computing).
      step      = the execution's wall time (ExecuteAsyncOnStream, XLA waiting included)."""
    rows = []
    for execution in executions:
        thunks = execution["thunks"]
        calls = [t for t in thunks if t[0].startswith(tfring_prefix)]
        if not calls:
            continue
        buckets = {}
        for name, b, e, done in calls:
            buckets.setdefault(name.rsplit(".", 1)[0], []).append((b, e, done))
        pairs = [v for v in buckets.values() if len(v) == 2]
        in_flight = [(start[0], done[2]) for start, done in pairs]
        compute = [(b, e) for name, b, e, _ in thunks if not name.startswith(tfring_prefix)]
        lo = min(b for b, _ in in_flight)
        hi = max(e for _, e in in_flight)
        last_start = max(start[0] for start, _ in pairs)
        overlap = sum(_union(in_flight, b, e) for b, e in _merge(compute))
        backward = sum(_union(in_flight, b, e) for b, e in _merge(c for c in compute if c[0] < last_start))
        flying = _union(in_flight, lo, hi)
        rows.append({"buckets": len(pairs), "overlap_ms": overlap, "overlap_backward_ms": backward,
                     "in_flight_ms": flying,
                     "exposed_ms": flying - overlap,
                     "backward_after_first_start_ms": _union(compute, lo, last_start),
                     "last_start_wait_ms": last_start - max(e for b, e in compute if b < last_start),
                     "compute_ms": _union(compute, min(b for b, _ in compute), max(e for _, e in compute)),
                     "step_ms": execution["window"][1] - execution["window"][0]})
    return rows


def _merge(intervals):
    merged = []
    for b, e in sorted(intervals):
        if merged and b <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([b, e])
    return merged


def _summary(rows, key):
    values = [r[key] for r in rows]
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _hlo_order(tf, model, loss_fn, x, y):
    """How many start calls precede the last dot/convolution in the optimized HLO of the
    same train step as a tf.function(jit_compile=True) (Keras' own train_function hides its
    HLO): the static schedule the timings come from."""
    opt = model.optimizer

    @tf.function(jit_compile=True)
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply(grads, model.trainable_variables)
        return loss

    hlo = step.experimental_get_compiler_ir(x, y)(stage="optimized_hlo")
    lines = [line for line in hlo[hlo.index("ENTRY"):].splitlines() if "=" in line]
    starts = [i for i, line in enumerate(lines) if "tfring_collective_start" in line]
    compute = [i for i, line in enumerate(lines) if re.search(r"\b(dot|convolution)\(", line)]
    return {"starts": len(starts), "starts_before_last_dot": sum(1 for s in starts if s < compute[-1]),
            "dots_after_last_start": sum(1 for c in compute if c > starts[-1])}


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
    order = _hlo_order(tf, model, loss_fn, tf.constant(x[:batch]), tf.constant(y[:batch]))
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
