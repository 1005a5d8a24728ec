"""tfring's reliance on private TensorFlow/Keras APIs, all taken from one gateway
(tfring/_private_api.py): the installed versions match every name in it, a change fails
loudly with a message naming the API, the versions found and what to do, and no other module
imports a private symbol. Also: ``import tfring`` stays TensorFlow-free and
``tfring.RingStrategy`` is imported lazily. Single process."""

import importlib.util
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("tfring.tensorflow") is None,
    reason="needs TensorFlow and the TF op library (tfring.tensorflow)",
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.timeout(120)
def test_private_apis_match_the_installed_tensorflow_and_keras():
    from tfring import _private_api

    problems = _private_api.find_problems()
    assert problems == [], (
        "A TensorFlow/Keras upgrade changed private APIs that tfring.RingStrategy relies on; "
        "adapt tfring/distribute (and its pinned versions) before releasing:\n" + "\n".join(problems)
    )


@pytest.mark.timeout(120)
def test_a_changed_signature_fails_loudly_naming_it(monkeypatch):
    from tensorflow.python.distribute import distribute_lib

    from tfring import _private_api

    def _reduce_to(self, reduce_op, value, destinations, options, experimental_hints):  # a new parameter
        return value

    monkeypatch.setattr(_private_api.OneDeviceExtended, "_reduce_to", _reduce_to)
    monkeypatch.delattr(distribute_lib, "get_update_replica_id")
    with pytest.raises(_private_api.PrivateApiError) as info:
        _private_api.check_private_apis()
    message = str(info.value)
    assert "OneDeviceExtended._reduce_to: parameters changed" in message, message
    assert "'experimental_hints'" in message, message
    assert "distribute_lib.get_update_replica_id: missing" in message, message
    assert "TensorFlow 2.21" in message and "Pin the supported versions" in message, message


@pytest.mark.timeout(120)
def test_ring_strategy_refuses_to_start_on_changed_apis(monkeypatch):
    import tfring
    from tfring import _private_api

    monkeypatch.setattr(_private_api, "_EXPECTED", _private_api._EXPECTED + [
        ("tensorflow.python.distribute.input_util.no_such_helper", "exists", None, "a test")])
    with pytest.raises(tfring.distribute.PrivateApiError, match="input_util.no_such_helper: missing"):
        tfring.RingStrategy()


@pytest.mark.timeout(120)
def test_import_tfring_needs_no_tensorflow_and_ring_strategy_is_lazy():
    code = (
        "import sys, tfring\n"
        "assert 'tensorflow' not in sys.modules, 'import tfring imported TensorFlow'\n"
        "cls = tfring.RingStrategy\n"
        "import tfring.distribute\n"
        "assert cls is tfring.distribute.RingStrategy and tfring.distribute is sys.modules['tfring.distribute']\n"
        "try:\n"
        "    tfring.NoSuchThing\n"
        "except AttributeError as e:\n"
        "    assert 'NoSuchThing' in str(e)\n"
        "print('lazy OK')\n"
    )
    env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run([sys.executable, "-c", code], check=False, env=env, capture_output=True, text=True, timeout=100)
    assert "lazy OK" in out.stdout, out.stdout + out.stderr


def _parse_tfring_modules():
    import ast

    for folder, _, files in os.walk(os.path.join(ROOT, "tfring")):
        for file in sorted(files):
            if file.endswith(".py"):
                path = os.path.join(folder, file)
                with open(path) as f:
                    yield os.path.relpath(path, ROOT), ast.parse(f.read())


def _covered(table, path):
    return any(entry == path or entry.startswith(path + ".") for entry in table)


def test_every_private_symbol_tfring_uses_is_in_the_checked_table():
    """A module that starts using another private TF/Keras symbol must add it to the
    gateway's table, so that the check above covers it in CI."""
    import ast

    from tfring import _private_api

    table = [path for path, *_ in _private_api._EXPECTED]
    private = ("tensorflow.python", "keras.src")
    unlisted = []
    for relpath, tree in _parse_tfring_modules():
        if relpath == os.path.join("tfring", "_private_api.py"):
            continue
        imported = {}  # local name -> dotted path
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(private):
                for alias in node.names:
                    imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        used = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in imported:
                used.add(f"{imported[node.value.id]}.{node.attr}")
        bare = {p for p in imported.values() if not any(u.startswith(p + ".") for u in used)}
        unlisted += [f"{relpath}: {p}" for p in sorted(used | bare) if not _covered(table, p)]
    assert unlisted == [], "private TF/Keras symbols used but not in _private_api._EXPECTED:\n" + "\n".join(unlisted)


def test_only_the_gateway_imports_private_tensorflow_or_keras_modules():
    """Every private TF/Keras name reaches tfring through tfring/_private_api.py: no other
    module imports ``tensorflow.python`` or ``keras.src`` (nor touches them as attributes)."""
    import ast

    private = ("tensorflow.python", "keras.src")
    offenders = []
    for relpath, tree in _parse_tfring_modules():
        if relpath == os.path.join("tfring", "_private_api.py"):
            continue
        for node in ast.walk(tree):
            modules = []
            if isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and node.value.id in ("tf", "tensorflow", "keras") and node.attr in ("python", "src")):
                modules = [f"{node.value.id}.{node.attr}"]
            offenders += [f"{relpath}:{node.lineno}: {m}" for m in modules
                          if m.startswith(private) or m in ("tf.python", "keras.src")]
    assert offenders == [], "import these through tfring._private_api:\n" + "\n".join(offenders)


def test_every_name_of_the_gateway_is_checked_and_every_use_exists():
    """Each name the gateway hands out is covered by a row of its table (so the signature
    check covers it), resolves in this installation, and every ``_private_api.X`` a tfring
    module uses is a name of the gateway."""
    import ast

    from tfring import _private_api

    table = [path for path, *_ in _private_api._EXPECTED]
    unchecked = [f"{name}: {path}" for name, path in _private_api._NAMES.items() if not _covered(table, path)]
    assert unchecked == [], "gateway names without a row in _EXPECTED:\n" + "\n".join(unchecked)
    for name in _private_api._NAMES:
        assert getattr(_private_api, name) is not None, name

    unknown = []
    for relpath, tree in _parse_tfring_modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "_private_api":
                names = [node.attr]
            elif isinstance(node, ast.ImportFrom) and node.module == "tfring._private_api":
                names = [alias.name for alias in node.names]
            else:
                continue
            unknown += [f"{relpath}:{node.lineno}: _private_api.{name}" for name in names
                        if name not in _private_api._NAMES and not hasattr(_private_api, name)]
    assert unknown == [], "names used but not offered by tfring._private_api:\n" + "\n".join(unknown)


def test_a_missing_gateway_name_fails_naming_the_symbol(monkeypatch):
    from tfring import _private_api

    name = "NoSuchThing"
    monkeypatch.setitem(_private_api._NAMES, name, "tensorflow.python.distribute.input_util.no_such_helper")
    with pytest.raises(_private_api.PrivateApiError, match="input_util.no_such_helper.*TensorFlow 2.21"):
        getattr(_private_api, name)


def test_the_private_keras_attributes_tfring_uses_exist_on_real_objects():
    import keras
    import numpy as np

    from tfring import _private_api

    optimizer = keras.optimizers.SGD(0.1)
    optimizer.build([keras.Variable(np.zeros(2, np.float32))])
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    missing = [f"optimizer.{a}" for a in _private_api.KERAS_OPTIMIZER_ATTRIBUTES if not hasattr(optimizer, a)]
    missing += [f"model.{a}" for a in _private_api.KERAS_MODEL_ATTRIBUTES if not hasattr(model, a)]
    assert missing == [], f"Keras lost {missing}: update the modules tfring/_private_api.py names for them"
