"""Rewrites the code cells of a Jupyter notebook (``.ipynb``) with the Python rules.

The code cells are rewritten together, in order, as one script (python_source.py), so a
name bound in one cell (an optimizer, a save path) is known in the next, as when the
notebook runs. Markdown and raw cells are left as they are, and so are IPython's own lines:
a cell that starts with a cell magic (``%%writefile``, ``%%bash``) is left whole, and
each line magic (``%matplotlib inline``, ``x = %time f()``) and shell line (``!pip install``,
``files = !ls``) is masked before the cells are parsed and put back after, byte for byte.
A shell line that the shell-script rules would change (``!horovodrun -np 2 ...``) is listed
as a manual edit with what they would write. Notes carry their cell (1-based, every cell
counted, as the notebook shows them from the top) and their line in that cell.

The notebook is read and written with ``nbformat`` when it is installed, else with ``json``;
either way a notebook whose cells need no change is returned as it came, and a changed one
is written as Jupyter writes it (JSON indented by one space, keys in their order, non-ASCII
kept, a final newline).
"""

import json
import re
import warnings
from dataclasses import replace

import libcst

from tfring._migrate import python_source, text_rules
from tfring._migrate.text_rules import Note

# A line magic or shell line, alone or assigned (`x = %time f()`, `files = !ls`). `%` and `!`
# must be followed by a name or a command: `% x)` (a continued `%` operation) and `!=` are Python.
_IPYTHON_LINE = re.compile(r"^(\s*)(?:[A-Za-z_]\w*\s*=\s*)?(?:%%?[A-Za-z]|!(?!=)\s*\S)")
_CELL_MARK = "#@tfring-migrate-cell@"
_MASK_MARK = "#@tfring-migrate-masked@"


class NotebookError(ValueError):
    """A file that is not a version 4 notebook, or a code cell that is not Python once its
    IPython lines are masked. Nothing is rewritten."""


def _nbformat():
    """The nbformat package, or None when it is not installed."""
    try:
        import nbformat
    except ImportError:
        return None
    return nbformat


def _load(text):
    """(notebook, dump): the notebook as a dict-like with ``cells``, and the function that
    writes it back as Jupyter does."""
    nbformat = _nbformat()
    try:
        if nbformat is not None:
            with warnings.catch_warnings():  # schema complaints (captured, not logged): not ours to fix
                warnings.simplefilter("ignore")
                notebook = nbformat.reads(text, as_version=nbformat.NO_CONVERT, capture_validation_error={})
        else:
            notebook = json.loads(text)
    except ValueError as e:  # json.JSONDecodeError and nbformat's NotJSONError are ValueErrors
        raise NotebookError(f"not a notebook (not JSON: {e})") from e
    if not isinstance(notebook, dict) or notebook.get("nbformat") != 4 or "cells" not in notebook:
        raise NotebookError("not a version 4 notebook: open and save it in Jupyter 4+ first")
    if nbformat is not None:
        return notebook, lambda nb: nbformat.writes(nb) + "\n"
    return notebook, lambda nb: json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def _source(cell):
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _set_source(cell, text):
    """Stores ``text`` in the form the cell had: a list of lines or one string."""
    cell["source"] = text.splitlines(keepends=True) if isinstance(cell.get("source"), list) else text


def _is_cell_magic(text):
    return text.lstrip().startswith("%%")


def _mask(text, masks):
    """``text`` with each IPython line replaced by a ``pass`` line of the same indent that
    names its index in ``masks`` (where the original line goes); line count unchanged."""
    out = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        found = _IPYTHON_LINE.match(body)
        if found is None:
            out.append(line)
            continue
        out.append(f"{found.group(1)}pass  {_MASK_MARK}{len(masks)}{line[len(body):]}")
        masks.append(body)
    return "".join(out)


def _unmask(text, masks):
    out = []
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        if _MASK_MARK in body:
            body = masks[int(body.rsplit(_MASK_MARK, 1)[1])]
        out.append(body + line[len(line.rstrip("\r\n")):])
    return "".join(out)


def _shell_notes(masked_line, line, cell):
    """A manual note for a ``!`` line that the shell-script rules would change."""
    command = masked_line.lstrip()
    if not command.startswith("!"):
        return []
    new, notes = text_rules.rewrite_file(command[1:] + "\n")
    if not notes:
        return []
    what = "; ".join(n.message for n in notes)
    return [Note(line, f"shell line left as written (tfring-migrate does not edit `!` lines): {what}; "
                       f"as a shell script it would read `!{new.strip()}`", False, cell=cell)]


def _parse_error(cells, code, masks):
    """The NotebookError naming the first code cell that does not parse."""
    for index in code:
        try:
            libcst.parse_module(_mask(_source(cells[index]), masks))
        except libcst.ParserSyntaxError as e:
            return NotebookError(f"cell {index + 1} is not valid Python once its IPython lines are masked "
                                 f"({type(e).__name__}: {e})")
    return NotebookError("its code cells, run in order, are not valid Python")


def rewrite(text):
    """(new_text, notes) for a notebook's JSON text; ``new_text is text`` when no cell
    changed. Raises NotebookError for a file that is not a version 4 notebook or a code cell
    that does not parse (after masking)."""
    notebook, dump = _load(text)
    cells = notebook["cells"]
    code = [i for i, cell in enumerate(cells)
            if cell.get("cell_type") == "code" and not _is_cell_magic(_source(cell))]
    masks, pieces, starts = [], [], []  # starts: (line of the cell's first line in the script, index)
    line = 1
    for index in code:
        body = _mask(_source(cells[index]), masks)
        if body and not body.endswith("\n"):
            body += "\n"
        pieces.append(f"{_CELL_MARK}{index}\n{body}")
        starts.append((line + 1, index))
        line += 1 + body.count("\n")
    try:
        script, notes = python_source.rewrite("".join(pieces))
    except libcst.ParserSyntaxError:
        raise _parse_error(cells, code, []) from None
    new_sources = _split(script, code)
    notes = [_in_cell(note, starts) for note in notes]
    for index in code:
        for offset, masked in enumerate(_source(cells[index]).splitlines()):
            if _IPYTHON_LINE.match(masked):
                notes += _shell_notes(masked, offset + 1, index + 1)
    changed = False
    for index in code:
        old = _source(cells[index])
        new = _unmask(new_sources[index], masks)
        if not old.endswith("\n") and new.endswith("\n"):
            new = new[:-1]
        if new != old:
            _set_source(cells[index], new)
            changed = True
    notes.sort(key=lambda n: (n.cell, n.line))
    return (dump(notebook) if changed else text), notes


def _split(script, code):
    """{cell index: its new text} from the rewritten script; lines before the first cell's
    mark (an ``import tfring`` added at the top) belong to the first code cell."""
    sources = {index: [] for index in code}
    current = code[0] if code else None
    for line in script.splitlines(keepends=True):
        if line.startswith(_CELL_MARK):
            current = int(line[len(_CELL_MARK):])
        elif current is not None:
            sources[current].append(line)
    return {index: "".join(lines) for index, lines in sources.items()}


def _in_cell(note, starts):
    """``note`` (a line of the joined script) as a line of its cell."""
    first, index = max((s for s in starts if s[0] <= note.line), default=starts[0])
    return replace(note, line=note.line - first + 1, cell=index + 1)
