"""Horovod module names -> tfring module names, read from rules.MODULES and
rules.UNSUPPORTED_MODULES, and which tfring modules exist. Shared by the Python rewrite
(python_source.py: imports and dotted uses) and the text rewrite (text_rules.py: module
names in shell scripts and other text). Pure functions; tfring's files are read, never
imported."""

from tfring._migrate import rules


def module_rule(name):
    """``(key, why)`` for a dotted Horovod module name: the longest key of ``rules.MODULES``
    or ``rules.UNSUPPORTED_MODULES`` that is ``name`` or a dotted prefix of it, and the reason
    when that key is unsupported (None when it is a rewrite). ``(None, None)``: no rule."""
    best = None
    for key in (*rules.MODULES, *rules.UNSUPPORTED_MODULES):
        if (name == key or name.startswith(key + ".")) and (best is None or len(key) > len(best)):
            best = key
    if best is None:
        return None, None
    return best, rules.UNSUPPORTED_MODULES.get(best) if best not in rules.MODULES else None


def longest_module(name):
    """The ``rules.MODULES`` key that rewrites ``name``, or None (no rule, or unsupported)."""
    key, why = module_rule(name)
    return key if key is not None and why is None else None


def unsupported_module(name):
    """Why Horovod module ``name`` has no tfring counterpart, or None."""
    return module_rule(name)[1]


def rewritten_module(name):
    """The tfring module that Horovod module ``name`` is rewritten to, or None."""
    key = longest_module(name)
    return None if key is None else rules.MODULES[key] + name[len(key):]


_TFRING_MODULES = None


def tfring_modules():
    """Every module and package of the installed tfring, by dotted name, read from its files
    (nothing is imported: tfring.tensorflow would load TensorFlow)."""
    global _TFRING_MODULES
    if _TFRING_MODULES is None:
        import importlib.machinery
        import os

        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tfring/
        suffixes = tuple(importlib.machinery.all_suffixes())
        found = set()
        for folder, subfolders, names in os.walk(root):
            subfolders[:] = [d for d in subfolders if not d.startswith((".", "__"))]
            relative = os.path.relpath(folder, root)
            package = "tfring" if relative == "." else "tfring." + relative.replace(os.sep, ".")
            if "__init__.py" in names:
                found.add(package)
            for name in names:
                for suffix in suffixes:
                    if name.endswith(suffix) and name != "__init__.py":
                        found.add(f"{package}.{name[:-len(suffix)].split('.')[0]}")
        _TFRING_MODULES = frozenset(found)
    return _TFRING_MODULES


def nearest_tfring_module(name):
    """``name`` or its longest dotted prefix that is a tfring module (at least ``tfring``)."""
    while name not in tfring_modules() and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def missing_module_note(horovod_name, tfring_name):
    """The advice for a rewrite whose target ``tfring_name`` has no file in tfring: it names
    the nearest module that exists, never another missing one."""
    return (f"{horovod_name}: tfring has no module {tfring_name}; import the names you need from "
            f"{nearest_tfring_module(tfring_name.rsplit('.', 1)[0])} (or see docs/migrating.md)")
