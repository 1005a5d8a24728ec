"""The writer's exception, raised again on every rank that waited for a coordinated save.

A script written for one process catches what its save raises (``except ValueError:``
around ``model.save(path)`` without a suffix, which Keras 3 refuses). Under tfring one rank
writes for all (``coordination.py``), so the others must fail the same way, or the script
catches the error on the writer and dies of another one on the rest. The writer publishes
its exception's class and text (``describe``); a waiting rank raises ``rebuild(...)``: an
instance of a class that derives from BOTH the writer's class and ``SaveAbortedError``,
named as the writer's (a traceback reads ``ValueError: <the writer's text>``), with that
text as its only argument (``e.args == (text,)``). ``except ValueError``, ``except
OSError`` and ``except tfring.saving.SaveAbortedError`` all catch it.

Only classes already imported in this process are used (``sys.modules``: the waiting rank
runs the same code as the writer); where the class is unknown, or cannot be combined (a
built-in whose instance layout clashes with ``OSError``'s, such as ``UnicodeError``), the
rank raises a plain ``SaveAbortedError`` with the writer's class name and text.
Stateless apart from a cache of the combined classes; thread-safe.
"""

import functools
import sys


def describe(exc):
    """What the writer publishes about its failure: a JSON-able dict."""
    cls = type(exc)
    return {"type": f"{cls.__module__}:{cls.__qualname__}", "message": str(exc)}


def _find_class(type_name):
    module_name, _, qualname = type_name.partition(":")
    obj = sys.modules.get(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj if isinstance(obj, type) and issubclass(obj, Exception) else None


def _init(self, message):
    """Builds the combined exception from the writer's text alone: the writer's class may
    want other arguments (``tf.errors.OpError``: node_def, op, message)."""
    base = type(self).__bases__[0]
    try:
        base.__init__(self, message)
    except TypeError:
        try:
            base.__init__(self, None, None, message)  # tf.errors.NotFoundError and its siblings
        except TypeError:
            pass
    self.args = (message,)


def _str(self):
    return self.args[0] if self.args else ""


@functools.cache
def combined_class(writer_class, aborted_class):
    """A class deriving from ``writer_class`` and ``aborted_class``, named as
    ``writer_class``; ``aborted_class`` itself when it already is a ``writer_class``
    (``OSError``, ``RuntimeError``); None when Python cannot combine them."""
    if issubclass(aborted_class, writer_class):
        bases = (aborted_class,)
    else:
        bases = (writer_class, aborted_class)
    namespace = {"__module__": writer_class.__module__, "__qualname__": writer_class.__qualname__,
                 "__init__": _init, "__str__": _str,
                 "__doc__": f"{writer_class.__qualname__} raised by the rank that wrote a coordinated save, "
                            "raised again on a rank that waited for it (tfring._saving.writer_error)."}
    try:
        return type(writer_class.__name__, bases, namespace)
    except TypeError:  # instance lay-out conflict, or no consistent method order
        return None


def rebuild(outcome, aborted_class):
    """The exception a waiting rank raises for the writer's published ``outcome``
    (``describe``'s dict): see the module docstring."""
    message = outcome.get("message", "")
    writer_class = _find_class(outcome.get("type", ""))
    cls = None if writer_class is None else combined_class(writer_class, aborted_class)
    if cls is None:
        name = outcome.get("type", "?").rpartition(":")[2]
        return aborted_class(f"{name}: {message}")
    return cls(message)
