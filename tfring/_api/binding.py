"""Binds a public package's names from its export table (``tfring._api.exports``).

Contract: ``bind(namespace)`` is called once, from the package's ``__init__``, with its
``globals()``. It imports every eager entry's module in table order and copies the names
into the namespace, sets ``__all__`` (the table's names, sorted) and returns
``(__getattr__, __dir__)`` for the package: a lazy name is imported on its first use and
then kept in the namespace; ``dir()`` lists every public name, lazy ones included. An
unknown name raises ``AttributeError`` naming the package, as Python's own message does.
Not thread-safe beyond what Python's import lock gives (as any import).
"""

import importlib
import os

from tfring._api import exports


def resolve(package, entry, name):
    """The object ``name`` of ``entry`` (an ``exports.Names`` / ``Modules`` row) of ``package``."""
    if isinstance(entry, exports.Modules):
        return importlib.import_module(f"{package}.{name}")
    return getattr(importlib.import_module(entry.module), name)


def module_name(namespace):
    """The dotted name of the module whose ``globals()`` is ``namespace``, also when it runs
    as ``__main__`` (an entry point: ``python -m tfring.runner.launch``, or spark-submit of
    tfring/spark/compute_worker.py's file)."""
    if namespace["__name__"] != "__main__":
        return namespace["__name__"]
    if namespace.get("__spec__") is not None:
        return namespace["__spec__"].name
    tfring_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.relpath(os.path.abspath(namespace["__file__"]), tfring_parent)[:-len(".py")].replace(os.sep, ".")


def bind(namespace):
    package = module_name(namespace)
    rows = exports.TABLES[package]
    lazy = {}
    for entry in rows:
        for name in entry.names:
            if isinstance(entry, exports.Defined):
                if name not in namespace:
                    raise ImportError(f"{package}: the export table says {name!r} is defined in the package "
                                      "itself, but its __init__ does not define it")
            elif entry.lazy:
                lazy[name] = entry
            else:
                namespace[name] = resolve(package, entry, name)
    namespace["__all__"] = exports.public_names(package)

    def __getattr__(name):
        if name not in lazy:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = namespace[name] = resolve(package, lazy[name], name)
        return value

    def __dir__():
        return sorted(set(namespace) | set(namespace["__all__"]))

    return __getattr__, __dir__
