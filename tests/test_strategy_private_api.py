"""RingStrategy's reliance on private TensorFlow/Keras APIs (tfring/distribute/_tf_private.py):
the installed versions match, and a change fails loudly with a message naming the API,
the versions found and what to do. Also: ``import tfring`` stays TensorFlow-free and
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
    from tfring.distribute import _tf_private

    problems = _tf_private.find_problems()
    assert problems == [], (
        "A TensorFlow/Keras upgrade changed private APIs that tfring.RingStrategy relies on; "
        "adapt tfring/distribute (and its pinned versions) before releasing:\n" + "\n".join(problems)
    )


@pytest.mark.timeout(120)
def test_a_changed_signature_fails_loudly_naming_it(monkeypatch):
    from tfring.distribute import _tf_private

    def _reduce_to(self, reduce_op, value, destinations, options, experimental_hints):  # a new parameter
        return value

    monkeypatch.setattr(_tf_private.OneDeviceExtended, "_reduce_to", _reduce_to)
    monkeypatch.delattr(_tf_private.distribute_lib, "get_update_replica_id")
    with pytest.raises(_tf_private.PrivateApiError) as info:
        _tf_private.check_private_apis()
    message = str(info.value)
    assert "OneDeviceExtended._reduce_to: parameters changed" in message, message
    assert "'experimental_hints'" in message, message
    assert "distribute_lib.get_update_replica_id: missing" in message, message
    assert "TensorFlow 2.21" in message and "Pin the supported versions" in message, message


@pytest.mark.timeout(120)
def test_ring_strategy_refuses_to_start_on_changed_apis(monkeypatch):
    import tfring
    from tfring.distribute import _tf_private

    monkeypatch.setattr(_tf_private, "_EXPECTED", _tf_private._EXPECTED + [
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


def test_every_private_symbol_tfring_uses_is_in_the_checked_table():
    """A module that starts using another private TF/Keras symbol must add it to
    _tf_private's table, so that the check above covers it in CI."""
    import ast

    from tfring.distribute import _tf_private

    table = [path for path, *_ in _tf_private._EXPECTED]

    def covered(path):
        return any(entry == path or entry.startswith(path + ".") for entry in table)

    private = ("tensorflow.python", "keras.src")
    unlisted = []
    for folder, _, files in os.walk(os.path.join(ROOT, "tfring")):
        for file in files:
            if not file.endswith(".py") or file == "_tf_private.py":
                continue
            source_path = os.path.join(folder, file)
            with open(source_path) as f:
                tree = ast.parse(f.read())
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
            unlisted += [f"{os.path.relpath(source_path, ROOT)}: {p}" for p in sorted(used | bare) if not covered(p)]
    assert unlisted == [], "private TF/Keras symbols used but not in _tf_private._EXPECTED:\n" + "\n".join(unlisted)
