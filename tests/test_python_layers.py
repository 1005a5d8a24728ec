"""tfring's Python layering: imports run one way. Each module belongs to a layer (by the
longest prefix of its name in LAYERS); an import statement, at the top of a file or inside a
function, names a module of its own layer or of one below it, and no modules import each
other in a circle, even within a layer (KNOWN_CIRCLES lists what is left). What a lower layer needs from
the launcher and elastic world lives in tfring/_bootstrap; the few calls that must still
reach up go through tfring/_bootstrap/providers.py, the one table of them, and nothing
else imports a tfring module by a computed name. Package facades bind their public names
from the export tables (tfring/_api/exports.py) and hold no import statements of their own
beyond the binding. No build needed: reads the sources."""

import ast
import os

import pytest

from tfring._bootstrap import providers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Lowest first: (layer, module prefixes). A module's layer is that of its longest prefix.
# The implementation lives in private folders, one per layer; everything outside them is a
# face (the last layer), checked by test_every_public_module_is_a_face.
LAYERS = [
    ("base", ["tfring._core", "tfring._errors"]),
    ("bootstrap", ["tfring._bootstrap"]),
    # basics, NumPy collectives, process sets, settings, GPU; the API tables; TF's private names
    ("core", ["tfring._basics", "tfring._api", "tfring._interrupts", "tfring._private_api"]),
    ("tensorflow", ["tfring._tensorflow"]),
    ("saving", ["tfring._saving"]),
    ("keras", ["tfring._keras"]),
    ("distribute", ["tfring._distribute"]),
    ("launcher", ["tfring._runner"]),
    # All of elastic training: the driver uses the launcher; tfringrun hands it an elastic
    # job through the provider elastic_launch.
    ("elastic", ["tfring._elastic"]),
    ("engines", ["tfring._engines"]),  # Spark, Ray, the tf.data service's launcher side
    ("tools", ["tfring._migrate"]),
    ("faces", ["tfring"]),  # the public packages and modules: bindings and entry points only
]
# Upward imports known and not yet removed: (file, imported module) -> what to do. An entry
# that no longer occurs fails the test, so this list only shrinks.
KNOWN = {}
# Import circles known and not yet broken: the modules of the circle -> why. A circle that
# no longer occurs fails the test, so this list only shrinks.
KNOWN_CIRCLES = {}
# The only modules that import by a computed name: the facades' binding, the providers'
# table, and the private TF/Keras API gateway (TensorFlow's modules, not tfring's).
DYNAMIC_IMPORTERS = {"tfring/_api/binding.py", "tfring/_bootstrap/providers.py", "tfring/_private_api.py"}


def layer_of(module):
    """The index in LAYERS of ``module`` (a dotted name under tfring)."""
    best, found = -1, None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), index
    return found


def _modules():
    for folder, dirs, files in os.walk(os.path.join(ROOT, "tfring")):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for file in sorted(files):
            if file.endswith(".py"):
                path = os.path.join(folder, file)
                relpath = os.path.relpath(path, ROOT)
                name = relpath[:-3].replace(os.sep, ".")
                is_package = name.endswith(".__init__")
                name = name[: -len(".__init__")] if is_package else name
                with open(path, encoding="utf-8") as f:
                    yield relpath, name, is_package, ast.parse(f.read())


def _is_module(dotted):
    path = os.path.join(ROOT, *dotted.split("."))
    return os.path.isdir(path) or os.path.exists(path + ".py") or dotted == "tfring._core"


def imported_modules(name, is_package, tree):
    """(line, module) for each tfring module an import statement of module ``name`` names;
    ``from package import submodule`` names the submodule."""
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] == "tfring")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            if base.split(".")[0] != "tfring":
                continue
            for alias in node.names:
                target = f"{base}.{alias.name}"
                yield node.lineno, target if _is_module(target) else base


def find_upward_imports(modules):
    """``[(relpath, line, target, why)]`` for each import of a higher layer."""
    problems = []
    for relpath, name, is_package, tree in modules:
        own = layer_of(name)
        for line, target in imported_modules(name, is_package, tree):
            theirs = layer_of(target)
            if theirs is not None and own is not None and theirs > own:
                problems.append((relpath, line, target,
                                 f"{LAYERS[own][0]} may not import the higher layer {LAYERS[theirs][0]}"))
    return problems


def test_every_module_has_a_layer():
    assert [relpath for relpath, name, *_ in _modules() if layer_of(name) is None] == []


def test_imports_run_one_way():
    problems = find_upward_imports(_modules())
    unknown = [f"{relpath}:{line}: {target} ({why})" for relpath, line, target, why in problems
               if (relpath, target) not in KNOWN]
    assert unknown == [], ("imports into a higher layer (move what the lower layer needs into tfring/_bootstrap, "
                           "or name the call in tfring/_bootstrap/providers.py):\n" + "\n".join(unknown))
    found = {(relpath, target) for relpath, _, target, _ in problems}
    stale = [f"{relpath}: {target}" for relpath, target in KNOWN if (relpath, target) not in found]
    present = [key for key in stale if os.path.exists(os.path.join(ROOT, key.split(":")[0]))]
    assert present == [], "fixed: remove these from KNOWN:\n" + "\n".join(present)


def test_the_check_catches_an_upward_import():
    """The lower layers' former upward imports (issue 39) would fail the check."""
    sources = {
        "tfring._basics.basics": "def init():\n    from tfring._elastic import worker\n",
        "tfring._tensorflow.tf1": "def wrap():\n    from tfring import keras as tfring_keras\n",
        "tfring._tensorflow.grad_reduction": "from tfring._elastic import worker as elastic_worker\n",
        "tfring._basics.environment_discovery": "def store():\n    from tfring._runner import jobenv, network\n",
        "tfring._runner.launch": "def main():\n    from tfring._elastic.launch import launch_elastic\n",
        "tfring._elastic.driver": "from tfring._basics import basics\nfrom tfring._runner import supervisor\n",  # downward
        "tfring._keras.saving": "from tfring import errors\n",  # a face, from the implementation
    }
    modules = [(name, name, False, ast.parse(text)) for name, text in sources.items()]
    assert sorted((relpath, target) for relpath, _, target, _ in find_upward_imports(modules)) == [
        ("tfring._basics.basics", "tfring._elastic.worker"),
        ("tfring._basics.environment_discovery", "tfring._runner.jobenv"),
        ("tfring._basics.environment_discovery", "tfring._runner.network"),
        ("tfring._keras.saving", "tfring.errors"),
        ("tfring._runner.launch", "tfring._elastic.launch"),
        ("tfring._tensorflow.grad_reduction", "tfring._elastic.worker"),
        ("tfring._tensorflow.tf1", "tfring.keras"),
    ]


def test_only_the_declared_places_import_by_a_computed_name():
    offenders = []
    for relpath, _, _, tree in _modules():
        if relpath in DYNAMIC_IMPORTERS:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called in ("import_module", "__import__"):
                    offenders.append(f"{relpath}:{node.lineno}")
    assert offenders == [], ("import tfring modules with import statements, or name the call in "
                             "tfring/_bootstrap/providers.py:\n" + "\n".join(offenders))


@pytest.mark.parametrize("name", sorted(providers.PROVIDERS))
def test_every_provider_resolves(name):
    module, _ = providers.PROVIDERS[name]
    if module.startswith("tfring.keras"):
        pytest.importorskip("tensorflow")
    assert providers.get(name) is not None


def test_the_bootstrap_imports_only_the_base():
    base = LAYERS[0][1]
    for relpath, name, is_package, tree in _modules():
        if name.startswith("tfring._bootstrap"):
            for line, target in imported_modules(name, is_package, tree):
                assert target.startswith("tfring._bootstrap") or target in base, f"{relpath}:{line}: {target}"


def import_graph(modules):
    """``{module: {tfring module it imports}}``: every import statement, at the top of a file
    or inside a function; ``from package import name`` names the package when ``name`` is
    not a module."""
    graph = {}
    for _, name, is_package, tree in modules:
        graph.setdefault(name, set()).update(
            target for _, target in imported_modules(name, is_package, tree) if target != name)
    return graph


def import_circles(graph):
    """The strongly connected components of ``graph`` with more than one module (Tarjan's
    algorithm, iterative): each a set of modules that import each other, directly or not."""
    index, low, on_stack, stack, circles = {}, {}, set(), [], []
    for root in sorted(graph):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(sorted(graph.get(root, ()))))]
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(frozenset(component))
    return circles


def test_no_import_circle_in_tfring():
    """No two tfring modules import each other, directly or through others, counting imports
    inside functions: what both need goes into a lower module of its own."""
    circles = import_circles(import_graph(_modules()))
    unknown = [" <-> ".join(sorted(c)) for c in circles if c not in KNOWN_CIRCLES]
    assert unknown == [], ("import circles (move the piece both sides need into a module of its own "
                           "that neither imports back):\n" + "\n".join(unknown))
    stale = [" <-> ".join(sorted(c)) for c in KNOWN_CIRCLES if c not in circles]
    assert stale == [], "broken: remove these from KNOWN_CIRCLES:\n" + "\n".join(stale)


def test_the_check_finds_an_import_circle():
    """The former circles (issue 48) and one through a function's import."""
    sources = {
        "tfring._keras.saving": "def load_model():\n    from tfring._keras.distributed_optimizer import X\n",
        "tfring._keras.distributed_optimizer": "from tfring._keras.saving import register_serialization_alias\n",
        "tfring._distribute.strategy": "from tfring._distribute import keras_integration\n",
        "tfring._distribute.keras_integration": "def f():\n    from tfring._distribute.strategy import RingStrategy\n",
        "tfring._keras.model_preparation": "def f():\n    from tfring._keras import progress\n",
        "tfring._keras.progress": "from tfring._keras import step_agreement\n",
        "tfring._keras.step_agreement": "from tfring._keras.model_preparation import is_distributed\n",
        "tfring._keras.optimizer_mark": "",
        "tfring._keras.loss_scale_optimizer": "from tfring._keras.optimizer_mark import is_distributed\n",
    }
    modules = [(name, name, False, ast.parse(text)) for name, text in sources.items()]
    assert sorted(sorted(c) for c in import_circles(import_graph(modules))) == [
        ["tfring._distribute.keras_integration", "tfring._distribute.strategy"],
        ["tfring._keras.distributed_optimizer", "tfring._keras.saving"],
        ["tfring._keras.model_preparation", "tfring._keras.progress", "tfring._keras.step_agreement"],
    ]


# At most this many modules outside tfring's private (``_``-prefixed) folders and modules.
MAX_PUBLIC_MODULES = 25
# A face's imports beyond the binding, each for a side effect the package promises.
FACE_SIDE_EFFECTS = {"tfring.tensorflow": {"tfring._tensorflow.gradients"}}  # registers the ops' gradients


def public_modules():
    """``[(relpath, name, tree)]`` of the modules no part of whose name starts with ``_``."""
    return [(relpath, name, tree) for relpath, name, _, tree in _modules()
            if not any(part.startswith("_") for part in name.split(".")[1:])]


def _is_main_block(node):
    test = getattr(node, "test", None)
    return (isinstance(node, ast.If) and isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
            and test.left.id == "__name__")


def face_problems(name, tree):
    """Why module ``name`` is not a face, or ``[]``. A face is a docstring-only package, or
    binds its names from its export table (``__getattr__, __dir__ = _bind(globals())``) with
    no other import than the binding's (and FACE_SIDE_EFFECTS); an entry point may end with
    an ``if __name__ == "__main__":`` block that runs its private module's main."""
    from tfring._api import exports

    body = [node for node in tree.body
            if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))]  # the docstring
    if not body:
        return []
    problems = [] if name in exports.TABLES else [f"{name}: no table in tfring/_api/exports.py"]
    binds = False
    for node in body:
        if isinstance(node, ast.ImportFrom) and node.module == "tfring._api.binding":
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            targets = ({f"{node.module}.{a.name}" for a in node.names} if isinstance(node, ast.ImportFrom)
                       else {a.name for a in node.names})
            if targets <= FACE_SIDE_EFFECTS.get(name, set()):
                continue
            problems.append(f"{name}:{node.lineno}: imports {sorted(targets)} (bind names through the table)")
        elif isinstance(node, ast.Assign) and "_bind(globals())" in ast.unparse(node.value):
            binds = True
        elif isinstance(node, ast.Assign) and isinstance(node.value, (ast.Constant, ast.Tuple)):
            continue  # a constant the table lists as Defined
        elif not _is_main_block(node):
            problems.append(f"{name}:{node.lineno}: {type(node).__name__} (faces hold no code)")
    return problems + ([] if binds else [f"{name}: does not bind its names (_bind(globals()))"])


def test_at_most_25_public_modules():
    names = sorted(name for _, name, _ in public_modules())
    assert len(names) <= MAX_PUBLIC_MODULES, (f"{len(names)} modules outside tfring's private folders (at most "
                                              f"{MAX_PUBLIC_MODULES}; implementation goes in tfring/_<layer>/):\n"
                                              + "\n".join(names))


def test_every_public_module_is_a_face():
    problems = [p for _, name, tree in public_modules() for p in face_problems(name, tree)]
    assert problems == [], "public modules that are not faces:\n" + "\n".join(problems)


def test_the_face_check_catches_code_in_a_face():
    """The former public modules with code (tfring/monitoring.py before the move) would fail."""
    code = ('"""Metrics."""\nfrom tfring._basics import basics\n\n'
            "def interval_metrics(before, after):\n    return {}\n")
    face = ('"""Metrics."""\nfrom tfring._api.binding import bind as _bind\n\n'
            "__getattr__, __dir__ = _bind(globals())\n")
    assert face_problems("tfring.monitoring", ast.parse(face)) == []
    assert face_problems("tfring.monitoring", ast.parse(code)) == [
        "tfring.monitoring:2: imports ['tfring._basics.basics'] (bind names through the table)",
        "tfring.monitoring:4: FunctionDef (faces hold no code)",
        "tfring.monitoring: does not bind its names (_bind(globals()))",
    ]
    assert face_problems("tfring.no_table", ast.parse(face)) == ["tfring.no_table: no table in tfring/_api/exports.py"]
