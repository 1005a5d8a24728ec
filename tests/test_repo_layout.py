"""The repository's top-level Python folders import one way (issue 39):

    tfring/       the product: imports none of the folders below
    tools/        developer tooling, tools.hostlab (emulated hosts) included: tfring only
    tests/        the test suite (tests/measure: its scenarios measured): tfring, tools
    benchmarks/   the product's benchmarks: tfring, tools
    lab/          the design lab (scale lab, A/B tools, results): tfring, tools, and the
                  benchmarks' scripts it runs as workloads

so tests never depend on the lab or on a benchmark, and neither the lab nor a benchmark
reaches into the tests. Imports inside string literals count too (a test's worker script,
``python -c`` code): the process that runs them imports from the same tree. What two of them share lives in tools/ (or in tfring when a user
needs it). Static (AST), single process, no TensorFlow."""

import ast
import os
import re
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# folder -> the other folders its Python files may import
ALLOWED = {
    "tfring": set(),
    "tools": {"tfring"},
    "tests": {"tfring", "tools"},
    "benchmarks": {"tfring", "tools"},
    "lab": {"tfring", "tools", "benchmarks"},
}


def _python_files(root, folder):
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
        dirnames[:] = [d for d in dirnames if d not in ("__pycache__", "migrate_inputs")]
        for name in sorted(filenames):
            if name.endswith(".py"):
                yield os.path.join(dirpath, name)


def _flat_modules(root, folder):
    """Modules that scripts of ``folder`` import by bare name after putting the folder on
    sys.path (benchmarks' ``import bench_common``): such an import reaches that folder too."""
    return {name[:-3] for name in os.listdir(os.path.join(root, folder))
            if name.endswith(".py") and name != "__init__.py"}


# An import line in a string: Python source that a test or a script runs elsewhere (a worker
# script, ``python -c``), where the string does not parse as a whole (a fragment, a template).
_IMPORT_LINE = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\b|import\s+([\w.]+(?:\s*,\s*[\w.]+)*))",
                          re.MULTILINE)


def _imports(tree, first_line=1):
    """(line, module) for each absolute import statement of ``tree``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield first_line + node.lineno - 1, node.module
        elif isinstance(node, ast.Import):
            yield from ((first_line + node.lineno - 1, alias.name) for alias in node.names)


def _string_imports(node):
    """(line, module) for each import a string literal holds: the code of a worker script or
    of ``python -c`` imports what the file holding it depends on, as much as its own."""
    text = node.value
    if "import" not in text:
        return
    try:
        yield from _imports(ast.parse(textwrap.dedent(text)), node.lineno)
    except SyntaxError:
        for m in _IMPORT_LINE.finditer(text):
            line = node.lineno + text.count("\n", 0, m.start())
            for name in (m.group(1),) if m.group(1) else m.group(2).split(","):
                yield line, name.strip()


def _imported_folders(path, flat):
    with open(path) as f:
        tree = ast.parse(f.read(), filename=path)
    found = list(_imports(tree))
    examples = os.path.abspath(path) == os.path.abspath(__file__)  # this file's strings: the check's examples
    for node in ast.walk(tree):
        if not examples and isinstance(node, ast.Constant) and isinstance(node.value, str):
            found += _string_imports(node)
    for lineno, name in sorted(set(found)):
        top = name.split(".")[0]
        if top in ALLOWED:
            yield lineno, name, top
        elif top in flat:
            yield lineno, name, flat[top]


def layering_violations(root=ROOT):
    """['<file>:<line>: imports <module> (<folder>)', ...] for every import against ALLOWED."""
    flat = {m: "benchmarks" for m in _flat_modules(root, "benchmarks")}
    out = []
    for folder, allowed in ALLOWED.items():
        for path in _python_files(root, folder):
            for lineno, name, target in _imported_folders(path, flat):
                if target != folder and target not in allowed:
                    out.append(f"{os.path.relpath(path, root)}:{lineno}: imports {name} ({target}/)")
    return out


def test_top_level_folders_import_one_way():
    violations = layering_violations()
    assert violations == [], (
        "these imports cross the layout of tests/test_repo_layout.py (move what both sides need "
        "to tools/, or into tfring when it is product code):\n" + "\n".join(violations))


def test_the_check_sees_a_violation(tmp_path):
    """The check is not vacuous: a tests module importing the lab, a benchmark importing
    tests, a bare import of a benchmark's module and a tool importing tests are all named,
    in code and in the strings of code that a test or a benchmark runs (a worker script)."""
    for folder, text in {"tests": ("from lab.scale import model\nimport bench_common\n"
                                   "WORKER = 'import numpy as np\\nfrom benchmarks.xla_overlap import steps\\n'\n"
                                   "FRAGMENT = 'if x:\\n  import bench_common, os\\n'\n"),
                         "benchmarks": "from tests import helpers\nCODE = 'import tests.workers.x'\n",
                         "tools": "import tests.helpers\n",
                         "lab": "from benchmarks import whole_fit\nfrom tools.hostlab import netns\n",
                         "tfring": "import tools\n"}.items():
        os.makedirs(tmp_path / folder)
        (tmp_path / folder / "m.py").write_text(text)
    (tmp_path / "benchmarks" / "bench_common.py").write_text("")
    found = layering_violations(str(tmp_path))
    assert sorted(found) == sorted([
        "tests/m.py:1: imports lab.scale (lab/)",
        "tests/m.py:2: imports bench_common (benchmarks/)",
        "tests/m.py:4: imports benchmarks.xla_overlap (benchmarks/)",
        "tests/m.py:5: imports bench_common (benchmarks/)",
        "benchmarks/m.py:1: imports tests (tests/)",
        "benchmarks/m.py:2: imports tests.workers.x (tests/)",
        "tools/m.py:1: imports tests.helpers (tests/)",
        "tfring/m.py:1: imports tools (tools/)",
    ]), found
