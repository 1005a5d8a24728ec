"""Why the ranks' model states differ, when ``broadcast_model_state``'s one buffer does not
match across ranks.

``state.broadcast_as_one_buffer`` packs every variable into one ``uint8`` buffer, so the core
can only say that the buffer's sizes differ (``ranks disagree on the shape: rank 0 has
[102546860], rank 1 has [204881228]``), which names nothing the user wrote. When that
``MismatchError`` comes, every rank has it (the coordinator answers every rank with the
error), so the ranks can afford one more exchange: each sends a description of its
variables (path, shape, dtype, bytes, model or optimizer), and ``explain`` compares every
rank's list with the root's: counts and bytes per rank, the first variables only one side
has, the first whose shapes differ, and the likely fix.

Blocking (two allgathers); every rank must get here, which the mismatch guarantees.
"""

import json

import numpy as np

from tfring import _errors as errors
from tfring._basics import ops

SHOWN = 3  # variables named per difference


def describe(model, variables):
    """One ``[path, shape, dtype, nbytes, part]`` per variable; part is "optimizer" for the
    optimizer's variables, else "model"."""
    optimizer = getattr(model, "optimizer", None)
    optimizer_ids = {id(v) for v in (optimizer.variables if optimizer is not None and optimizer.built else ())}
    out = []
    for v in variables:
        name = str(getattr(v, "path", None) or getattr(v, "name", "?"))
        nbytes = int(np.prod(v.shape, dtype=np.int64)) * np.dtype(v.numpy().dtype).itemsize
        out.append([name, [int(d) for d in v.shape], str(v.dtype), nbytes,
                    "optimizer" if id(v) in optimizer_ids else "model"])
    return out


def gather(description, name):
    """Every rank's ``description``, in rank order (JSON through two allgathers)."""
    payload = np.frombuffer(json.dumps(description).encode(), np.uint8)
    sizes = ops.allgather(np.array([payload.size], np.int64), name=f"{name}.diagnosis.sizes")
    data = ops.allgather(payload, name=f"{name}.diagnosis.data")
    out, offset = [], 0
    for n in sizes.tolist():
        out.append(json.loads(data[offset:offset + n].tobytes()))
        offset += n
    return out


def _first(entries):
    return ", ".join(f"{e[0]} {e[1]} {e[2]}" for e in entries[:SHOWN]) + (", ..." if len(entries) > SHOWN else "")


def explain(by_rank, root_rank, name):
    """The message naming what differs between each rank's variables and ``root_rank``'s;
    None when the lists agree (the mismatch was about something else)."""
    counts = ", ".join(f"rank {r} has {len(d)} variables ({sum(e[3] for e in d)} bytes)"
                       for r, d in enumerate(by_rank))
    lines = [f"ranks disagree on the model state that {name!r} broadcasts from rank {root_rank}: {counts}."]
    root = {e[0]: e for e in by_rank[root_rank]}
    parts = set()
    for r, description in enumerate(by_rank):
        if r == root_rank:
            continue
        here = {e[0]: e for e in description}
        only_here = [e for e in description if e[0] not in root]
        only_root = [e for e in by_rank[root_rank] if e[0] not in here]
        reshaped = [(root[e[0]], e) for e in description if e[0] in root and root[e[0]][1:3] != e[1:3]]
        for entries, text in ((only_here, f"only rank {r} has"), (only_root, f"rank {r} lacks")):
            if entries:
                lines.append(f"{text} {len(entries)} (first: {_first(entries)}).")
                parts.update(e[4] for e in entries)
        if reshaped:
            shown = "; ".join(f"{a[0]}: rank {root_rank} {a[1]} {a[2]}, rank {r} {b[1]} {b[2]}"
                              for a, b in reshaped[:SHOWN])
            lines.append(f"rank {r} differs in shape or dtype for {len(reshaped)} (first: {shown}).")
            parts.update(b[4] for _, b in reshaped)
    if not parts:
        return None
    if parts == {"optimizer"}:
        lines.append("Only the optimizer's variables differ: its slot variables exist on some ranks and not on "
                     "others. Keras 3 loads a .h5 model's optimizer without its slot variables: resume from a "
                     ".keras checkpoint, or build the optimizer on every rank before broadcasting "
                     "(model.optimizer.build(model.trainable_variables)).")
    else:
        lines.append("The models differ: build the same model (same layers, built with the same input shapes) on "
                     "every rank before broadcasting; if only some ranks loaded a checkpoint, load it on every "
                     "rank or on none.")
    return " ".join(lines)


def explained(error, model, variables, root_rank, name):
    """A ``MismatchError`` naming the differing variables, for the core's ``error`` about
    the packed buffer (raised from it by the caller)."""
    try:
        by_rank = gather(describe(model, variables), name)
    except errors.TfringError:
        return error  # the job broke meanwhile: the core's own error says enough
    message = explain(by_rank, root_rank, name)
    return error if message is None else errors.MismatchError(f"{message} (tfring: {error})")
