"""The one trace-time check that tfring's collectives are not being compiled by XLA, and its
one error.

tfring's ops are asynchronous custom kernels with no XLA lowering. Inside
``tf.function(jit_compile=True)`` (or Keras ``jit_compile=True``) XLA would fail much later
with an obscure "no registered kernel" message; ``check_not_xla`` fails at trace time
instead, with the fix. Every tfring entry point that can be traced calls it: the op
wrappers (through ``naming.resolve``), ``tfring.keras.DistributedOptimizer.apply`` and
``RingStrategy``'s ``strategy.run``. Auto-clustering (``tf.config.optimizer.set_jit(True)``)
needs no check: it simply leaves ops without an XLA kernel out of its clusters.

Verified on TF 2.21: ``GraphOrParentsInXlaContext(graph)`` (a private TF function, from
``tfring._private_api``) is True while tracing a ``jit_compile=True`` function (and its
cond/while bodies) and False otherwise.
"""

import tensorflow as tf

from tfring import _private_api


class XlaCompilationError(tf.errors.UnimplementedError, ValueError):
    """A tfring collective, ``DistributedOptimizer`` or ``RingStrategy.run`` traced inside an
    XLA-compiled function. A ``tf.errors.UnimplementedError`` (what TF raises for an op with
    no kernel) and a ``ValueError`` (what tfring.keras and RingStrategy raised for it before)."""


def in_xla_context(graph=None):
    """True while tracing inside an XLA-compiled function (``jit_compile=True``); ``graph``:
    default, the current default graph. False eagerly, and if the private check is gone."""
    if graph is None:
        if tf.executing_eagerly():
            return False
        graph = tf.compat.v1.get_default_graph()
    try:
        return bool(_private_api.GraphOrParentsInXlaContext(graph))
    except Exception:  # noqa: BLE001 - a private API changing must not break every op
        return False


def check_not_xla(what, graph=None):
    """Raises ``XlaCompilationError`` naming ``what`` (e.g. ``"tfring.tensorflow.allreduce"``)
    when ``graph`` (default: the current one) is being compiled by XLA."""
    if in_xla_context(graph):
        raise XlaCompilationError(
            None,
            None,
            f"{what} cannot run inside an XLA-compiled function (tf.function(jit_compile=True), or a "
            "Keras model compiled with jit_compile=True / 'auto' on a GPU): tfring's collectives have "
            "no XLA kernel. Turn XLA off for that function: tf.function(..., jit_compile=False) or "
            "model.compile(..., jit_compile=False) (tfring.keras, RingStrategy and every tfring "
            "callback passed to fit() do this for the models they see). You can still jit-compile "
            "the parts without collectives as separate functions.",
        )
