"""Rewrites inside plain text: ``horovodrun`` command lines and ``HOROVOD_*`` variable names.

These appear in shell scripts, Slurm batch files, READMEs, and in the comments and string
literals of Python scripts. Shell scripts and other text files also get their Horovod module
names (``python -c "import horovod.tensorflow"``, ``python -m horovod.X``) rewritten or
listed, as a Python import of them would be (``rewrite_file``). A command line is split into words on whitespace (quoting inside
horovodrun's own options is not needed by any option it has); everything from the first word
that is not an option is the worker command and is kept byte for byte.

Pure functions, no I/O.
"""

import re
from dataclasses import dataclass

from tfring._migrate import modules, rules

_VARIABLE = re.compile(r"\bHOROVOD_[A-Z0-9_]+\b")
_LAUNCHER = re.compile(r"\bhorovodrun\b")
_WORD = re.compile(r"\S+")
_MODULE_FLAG = re.compile(r"(-m\s+)(horovod(?:\.\w+)+)\b")
_HOROVOD_NAME = re.compile(r"(?<![\w.])horovod(?:\.\w+)+")


@dataclass(frozen=True)
class Note:
    """One thing the tool did or could not do, on a 1-based line of the input."""
    line: int
    message: str
    rewritten: bool  # False: the user must make this edit by hand (unless advice)
    advice: bool = False  # True: nothing to edit, but worth reading (not counted as a manual edit)
    cell: int = None  # a notebook's cell (1-based, every cell counted); None: line of the file

    @property
    def kind(self):
        return "rewritten" if self.rewritten else "note" if self.advice else "manual"

    @property
    def manual(self):
        return not self.rewritten and not self.advice

    def where(self, path):
        """``path:line``, or ``path cell N, line L`` in a notebook."""
        return f"{path}:{self.line}" if self.cell is None else f"{path} cell {self.cell}, line {self.line}"


def rewrite_variables(text, line=1):
    """``HOROVOD_X`` -> ``TFRING_Y`` for every name in ``rules.ENVIRONMENT`` that has an
    equivalent; notes for the others. Returns (text, notes); ``line`` numbers the notes of
    single-line text, multi-line text counts from it."""
    notes = []

    def replace(match):
        name = match.group(0)
        at = line + text.count("\n", 0, match.start())
        if name not in rules.ENVIRONMENT:
            return name  # not a Horovod setting the tool knows: left alone
        new = rules.ENVIRONMENT[name]
        if new is None:
            notes.append(Note(at, f"{name} has no tfring equivalent ({rules.ENVIRONMENT_REASONS[name]})", False))
            return name
        notes.append(Note(at, f"{name} -> {new}", True))
        return new

    return _VARIABLE.sub(replace, text), notes


def rewrite_launcher_line(text, line=1):
    """Rewrites the ``horovodrun`` command in one line of text into ``tfringrun``. Options
    with a counterpart are renamed, options that only chose Horovod's machinery are dropped;
    an option that matters and has no counterpart leaves the line unchanged, with a note.
    Returns (text, notes)."""
    found = _LAUNCHER.search(text)
    if found is None:
        return text, []
    words = [(m.start(), m.group(0)) for m in _WORD.finditer(text, found.end())]
    out, notes, i = [], [], 0
    while i < len(words):
        word = words[i][1]
        name, has_inline_value, inline_value = word.partition("=") if word.startswith("--") else (word, "", "")
        if not name.startswith("-"):
            break  # the worker command starts here
        if name in rules.LAUNCHER_UNSUPPORTED_OPTIONS:
            notes.append(Note(line, f"horovodrun {name} has no tfringrun counterpart: "
                                    f"{rules.LAUNCHER_UNSUPPORTED_OPTIONS[name]}; line left unchanged", False))
            return text, notes
        if name not in rules.LAUNCHER_OPTIONS:
            notes.append(Note(line, f"unknown horovodrun option {name}: line left unchanged; "
                                    "see tfringrun --help", False))
            return text, notes
        takes_value, new = rules.LAUNCHER_OPTIONS[name]
        value = None
        if takes_value:
            if has_inline_value:
                value = inline_value
            elif i + 1 < len(words):
                i += 1
                value = words[i][1]
            else:
                notes.append(Note(line, f"horovodrun {name} needs a value: line left unchanged", False))
                return text, notes
        if new is None:
            notes.append(Note(line, f"dropped horovodrun {name} (tfring chooses its own transport)", True))
        else:
            if name == "--log-level" and value is not None:
                value = value.lower()
            out.append(new if value is None else f"{new} {value}")
        i += 1
    # The worker command, kept byte for byte (with the line's end when there is none).
    tail = text[words[i][0]:] if i < len(words) else ("\n" if text.endswith("\n") else "")
    tail, module_notes = _rewrite_worker_module(tail, line)
    notes += module_notes
    new_text = text[:found.start()] + " ".join(["tfringrun", *out]) + (" " + tail if tail.strip() else tail)
    notes.insert(0, Note(line, "horovodrun -> tfringrun", True))
    return new_text, notes


def _rewrite_worker_module(command, line):
    """``python -m horovod.X`` in a worker command -> ``python -m`` its tfring module, for
    modules that are rows of rules.MODULES (``horovod.tensorflow.data.compute_worker``)."""
    notes = []

    def replace(match):
        new = rules.MODULES.get(match.group(2))
        if new is None:
            return match.group(0)
        notes.append(Note(line, f"python -m {match.group(2)} -> python -m {new}", True))
        return match.group(1) + new

    return _MODULE_FLAG.sub(replace, command), notes


def rewrite_modules(text, line=1):
    """Horovod module names in one line of a shell script or other text file, as an import of
    them is rewritten: to the tfring module where one exists (``horovod.tensorflow.keras`` ->
    ``tfring.keras``; a name under it, ``horovod.spark.run``, goes with it;
    ``horovod.spark.tensorflow.compute_worker`` -> ``tfring.spark.compute_worker``), else left
    as written with a manual note saying what to use instead (``horovod.torch``). Returns
    (text, notes)."""
    notes = []

    def replace(match):
        name = match.group(0)
        why = modules.unsupported_module(name)
        new = modules.rewritten_module(name)
        if why is not None:
            notes.append(Note(line, f"{name}: {why}", False))
            return name
        if new is None:
            return name  # no rule (horovod.run and the like): the Python rules speak of those
        if new in modules.tfring_modules() or new.rsplit(".", 1)[0] in modules.tfring_modules():
            notes.append(Note(line, f"{name} -> {new}", True))
            return new
        notes.append(Note(line, modules.missing_module_note(name, new), False))
        return name

    return _HOROVOD_NAME.sub(replace, text), notes


def rewrite_file(text):
    """Every rewrite for a shell script or other text file: ``rewrite_text``'s, then the
    Horovod module names of each line (``rewrite_modules``). Returns (text, notes)."""
    text, notes = rewrite_text(text)
    out = []
    for k, piece in enumerate(text.splitlines(keepends=True)):
        piece, module_notes = rewrite_modules(piece, k + 1)
        out.append(piece)
        notes += module_notes
    return "".join(out), sorted(notes, key=lambda n: n.line)


def rewrite_text(text, first_line=1):
    """Both rewrites over every line of ``text`` (a shell script, a comment, a string).
    Returns (text, notes)."""
    lines = text.splitlines(keepends=True)
    out, notes = [], []
    for k, piece in enumerate(lines):
        number = first_line + k
        piece, launcher_notes = rewrite_launcher_line(piece, number)
        piece, variable_notes = rewrite_variables(piece, number)
        out.append(piece)
        notes += launcher_notes + variable_notes
    return "".join(out), notes
