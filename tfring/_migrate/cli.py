"""The ``tfring-migrate`` command: a diff by default, ``--write`` to change files.

Exit code: 0 when nothing is left to edit by hand, 1 when manual edits remain (each one
printed as ``path:line: manual: ...``, in a notebook ``path cell N, line L: manual: ...``;
``note:`` lines are advice on code that works as it is and do not count), 2 for a bad
command line, an unreadable file, a file named .ipynb that is not a version 4 notebook, or a
Python file or notebook code cell that does not parse (nothing is written then).
"""

import argparse
import difflib
import os
import sys

import libcst

from tfring._migrate import notebook, python_source, text_rules

TEXT_SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch", ".pbs", ".job", ".cfg", ".env", ".yaml", ".yml", ".md", ".txt")


def _files(paths):
    """Every file named, and under each directory named, the Python files, notebooks and
    script files (hidden folders such as .ipynb_checkpoints are skipped)."""
    for path in paths:
        if os.path.isdir(path):
            for folder, subfolders, names in os.walk(path):
                subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
                for name in sorted(names):
                    if name.endswith((".py", ".ipynb")) or name.endswith(TEXT_SUFFIXES):
                        yield os.path.join(folder, name)
        else:
            yield path


def migrate_text(path, text):
    """(new_text, notes) for one file's text: a notebook by its .ipynb suffix, Python by suffix
    or a python shebang, else a shell script or other text."""
    if path.endswith(".ipynb"):
        return notebook.rewrite(text)
    is_python = path.endswith(".py") or text.startswith("#!") and "python" in text.split("\n", 1)[0]
    if is_python:
        return python_source.rewrite(text)
    return text_rules.rewrite_file(text)


def build_parser():
    p = argparse.ArgumentParser(
        prog="tfring-migrate",
        description="Rewrites a Horovod / Keras 2 / MultiWorkerMirroredStrategy script's mechanical edits for "
                    "tfring and Keras 3 and lists the edits left to make by hand (docs/migrating.md).")
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="files, or directories to search for .py files, .ipynb notebooks (their code cells) "
                        "and shell/batch scripts")
    p.add_argument("--write", action="store_true", help="change the files in place (default: print a unified diff)")
    p.add_argument("--quiet", action="store_true", help="list only the manual edits and notes, not the rewrites")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    results = []
    for path in _files(args.paths):
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
            new, notes = migrate_text(path, text)
        except (OSError, UnicodeDecodeError) as e:
            print(f"tfring-migrate: cannot read {path}: {e}", file=sys.stderr)
            return 2
        except notebook.NotebookError as e:
            print(f"tfring-migrate: {path}: {e}; nothing was changed", file=sys.stderr)
            return 2
        except libcst.ParserSyntaxError as e:
            print(f"tfring-migrate: {path} is not valid Python ({type(e).__name__}: {e}); nothing was changed",
                  file=sys.stderr)
            return 2
        results.append((path, text, new, notes))
    manual = 0
    for path, text, new, notes in results:
        if new != text:
            if args.write:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(new)
            else:
                sys.stdout.writelines(difflib.unified_diff(
                    text.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{path}", f"b/{path}"))
        for note in notes:
            manual += note.manual
            if not note.rewritten or not args.quiet:
                print(f"{note.where(path)}: {note.kind}: {note.message}", file=sys.stderr)
    changed = sum(new != text for _, text, new, _ in results)
    verb = "changed" if args.write else "would change"
    print(f"tfring-migrate: {verb} {changed} of {len(results)} file(s); {manual} manual edit(s) left",
          file=sys.stderr)
    return 1 if manual else 0


if __name__ == "__main__":
    sys.exit(main())
