"""The source text of functions sent by value (``tfring.run``, ``tfring.spark.run``), so
that ``inspect.getsource``, AutoGraph and tracebacks work on the ranks.

cloudpickle sends a function defined in a script's ``__main__`` or a notebook cell (and
the lambdas, nested and helper functions it uses) by value, and names the file of every
code object it sends ``<dynamic-code>``: on a rank nothing can find the source, so
AutoGraph cannot convert Python control flow on tensors (``if x > 2:`` in a
``Dataset.map`` function raises OperatorNotAllowedInGraphError) and tracebacks show no
source lines.

Here, on the caller's side (``dumps``), each code object sent by value keeps a file name:
  - a file of an imported module (not ``__main__``; a closure made inside a library): its
    own path, which the ranks read from their own copy as for any module;
  - any other file whose lines the caller has (a script, a notebook cell: IPython puts
    cells in ``linecache``): ``<CALLER:PATH>``, e.g. ``<tfring.run:/home/me/train.py>``,
    and the file's lines travel with the payload;
  - no lines (``<stdin>``, ``python -c``): cloudpickle's ``<dynamic-code>``, as before.
On a rank, ``register`` puts the lines in ``linecache`` under those names before the
payload is unpickled; ``linecache.checkcache`` keeps such entries (no mtime), as it keeps
IPython's.

Code objects travel as ``marshal`` data (nested code objects included), so caller and
ranks need the same Python minor version, as cloudpickle's own code pickling does.
"""

import linecache
import marshal
import os
import sys
import types


def _module_files():
    """Absolute paths of the files of the imported modules other than ``__main__``."""
    files = set()
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if name != "__main__" and isinstance(path, str):
            files.add(os.path.abspath(path))
    return files


def _renamed(code, names):
    """``code`` and its nested code objects with each ``co_filename`` replaced by
    ``names[co_filename]`` (when present)."""
    consts = tuple(_renamed(c, names) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=names.get(code.co_filename, code.co_filename), co_consts=consts)


class _Sources:
    """Decides the file name of each code object sent by value and collects the lines to
    send (``lines``: ``{name: [line, ...]}``)."""

    def __init__(self, caller):
        self.caller = caller
        self.lines = {}
        self._names = {}  # co_filename -> the name the ranks see
        self._module_files = _module_files()

    def _name(self, filename):
        if filename not in self._names:
            name = None
            if os.path.abspath(filename) in self._module_files:
                name = filename
            else:
                linecache.checkcache(filename)  # as inspect.findsource: the file as it is now
                lines = linecache.getlines(filename)
                if lines:
                    name = f"<{self.caller}:{filename}>"
                    self.lines[name] = list(lines)
            self._names[filename] = name
        return self._names[filename]

    def reduce_code(self, code):
        """A reduce value for ``code`` under its new file name; None: leave it to cloudpickle."""
        names = {}
        stack = [code]
        while stack:
            c = stack.pop()
            name = self._name(c.co_filename)
            if name is None:
                return None
            names[c.co_filename] = name
            stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
        try:
            return marshal.loads, (marshal.dumps(_renamed(code, names)),)
        except ValueError:  # a constant marshal cannot write (code built by hand)
            return None


def dumps(obj, caller):
    """``(cloudpickle bytes of obj, {file name: lines})``: the lines of the files whose
    code ``obj`` sends by value, under the names its code objects carry (module docstring).

    Call ``register(lines)`` on the receiving side before unpickling the bytes.
    """
    import io

    import cloudpickle

    sources = _Sources(caller)

    class Pickler(cloudpickle.Pickler):
        def reducer_override(self, o):
            if isinstance(o, types.CodeType):
                reduced = sources.reduce_code(o)
                if reduced is not None:
                    return reduced
            return super().reducer_override(o)

    buffer = io.BytesIO()
    Pickler(buffer, protocol=cloudpickle.DEFAULT_PROTOCOL).dump(obj)
    return buffer.getvalue(), sources.lines


def register(lines):
    """Puts ``dumps``' lines into ``linecache`` (replacing entries of the same names), where
    ``inspect.getsource``, AutoGraph and ``traceback`` look for source."""
    for name, file_lines in lines.items():
        linecache.cache[name] = (sum(map(len, file_lines)), None, list(file_lines), name)
