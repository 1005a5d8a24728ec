"""Reading an XLA-compiled Keras step's overlap of gradient allreduces with the backward
pass from recorded events: tfring's timeline (XLA_START / XLA_IN_FLIGHT / XLA_DONE spans per
start/done pair, cc/tf/xla/inflight.cc) and XLA:CPU's own thunk trace (TF profiler
capture), plus the optimized HLO's static order. Shared by benchmarks/xla_overlap.py (the
measurement) and tests/test_xla_overlap.py (its assertions from the order of events). No
tfring import; TensorFlow only where a function takes it or reads a capture.
"""

import re


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


def hlo_order(tf, model, loss_fn, x, y):
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
