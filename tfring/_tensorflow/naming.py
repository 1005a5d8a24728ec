"""Negotiation names of tfring.tensorflow's collectives.

The name of a collective is its key in the negotiation with rank 0: it must be equal on
every rank for the same collective and unique among collectives in flight at once. The rule
(docs/tensorflow.md, "Names"):

1. ``name=`` given: that string, as is, in every mode (the op itself is named after it).
2. Graph mode (inside ``tf.function`` or a ``tf.compat.v1`` graph), no name: the op's
   scoped name within its graph, made unique by the graph (``Graph.unique_name``), e.g.
   ``DistributedGradientTape_Allreduce/TfringGroupedAllreduce_1``, prefixed with the name of
   the enclosing ``tf.function`` graph (control-flow bodies belong to their function; a
   trailing ``_<digits>`` uid is removed), e.g. ``train_step/TfringAllreduce``. Every trace
   builds a fresh graph whose names restart, so a name does not depend on how often or in
   which order functions were traced (retracing for a new shape gives the same names).
   A ``tf.compat.v1`` graph has no prefix.
3. Eager mode, no name: ``<op>.eager.<n>``, the n-th unnamed eager call of that op type on
   this process. Equal across ranks as long as every rank makes its unnamed eager calls in
   the same order (what data-parallel scripts do); pass names otherwise.

Grouped allreduce: member i is ``<name>.<i>``.

On a process set other than the global one (id k), automatic names count apart, since only
the set's members make those calls: eagerly ``<op>.ps<k>.eager.<n>``, in a graph the default
op name gets ``_ps<k>`` (``TfringAllreduce_ps1``), so ranks outside the set, which build no
such op, number their other ops as the members do.
"""

import re

import tensorflow as tf

from tfring import _private_api
from tfring._basics import auto_names
from tfring._tensorflow import xla

_INVALID_OP_CHARS = re.compile(r"[^A-Za-z0-9_.\-/]")
_UID_SUFFIX = re.compile(r"_\d+$")


def check_name(name):
    if name is not None and (not isinstance(name, str) or not name):
        raise ValueError(f"name must be a non-empty string or None. Received: {name!r}")


def eager_key(kind, name=None):
    """Negotiation key for a call made outside any graph (also used by the object helpers)."""
    check_name(name)
    if name is not None:
        return name
    return auto_names.next_name(f"{kind}.eager")


def op_name_for(name):
    """A valid TF op name derived from a user's negotiation name."""
    cleaned = _INVALID_OP_CHARS.sub("_", name).strip("/") or "tfring"
    if not re.match(r"[A-Za-z0-9.]", cleaned[0]):
        cleaned = "T" + cleaned
    return cleaned


def function_prefix(graph):
    """``<function name>/`` for a tf.function graph (walking out of control-flow bodies),
    ``""`` for a tf.compat.v1 graph."""
    g = graph
    while getattr(g, "is_control_flow_graph", False) and getattr(g, "outer_graph", None) is not None:
        g = g.outer_graph
    if isinstance(g, _private_api.FuncGraph):
        return _UID_SUFFIX.sub("", g.name) + "/"
    return ""


def resolve(kind, default_op_name, name, process_set_id=0):
    """Returns ``(op_name, key)`` for a new op: ``op_name`` to pass as the TF op's ``name``
    (None eagerly), ``key`` the negotiation name (the same with and without XLA). Raises at
    trace time under XLA for an op without an XLA lowering here (``xla.lowered``)."""
    check_name(name)
    if process_set_id:
        kind, default_op_name = f"{kind}.ps{process_set_id}", f"{default_op_name}_ps{process_set_id}"
    if tf.executing_eagerly():
        return None, eager_key(kind, name)
    graph = tf.compat.v1.get_default_graph()
    if xla.in_xla_context(graph) and not xla.lowered(kind):
        xla.check_not_xla(f"tfring.tensorflow.{kind}", graph)
    scope = graph.unique_name(op_name_for(name) if name is not None else default_op_name)
    key = name if name is not None else function_prefix(graph) + scope
    # A trailing "/" makes TF use the reserved scope as the op's exact name.
    return scope + "/", key
