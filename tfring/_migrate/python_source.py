"""Rewrites one Python script's mechanical edits on its LibCST syntax tree.

What it changes (each with a note): Horovod imports and dotted uses -> tfring (an
``import horovod`` serving only ``horovod.run(...)`` becomes ``import tfring`` and each call
``tfring.run(...)``; ``from horovod import run`` -> ``from tfring import run``); Keras 2 optimizer ``lr=`` -> ``learning_rate=``;
``fit_generator``/``evaluate_generator``/``predict_generator``/``reset_states`` -> their
Keras 3 names; ``opt.variables()`` -> ``opt.variables`` and ``opt.lr`` ->
``opt.learning_rate`` where ``opt`` is a Keras optimizer (``_Bindings`` reads the script's
assignments first); ``K.set_value(v, x)``/``K.get_value(v)`` -> ``v.assign(x)``/``v.numpy()``;
``from keras.preprocessing.image import ImageDataGenerator`` -> ``tensorflow.keras``'s;
Keras-2-only keyword arguments of ``compile``/``fit``/... removed; ``tf.distribute``
multi-worker strategies -> ``tfring.RingStrategy()``; ``horovodrun`` lines and ``HOROVOD_*``
names in strings (comments are left as written). What it cannot change (TF1 names, reads of
``TF_CONFIG``, ``tf.estimator``, an ``.lr`` of unknown type, Keras 3 saves to a path without
its suffix or into an open file, a ``monitor=`` Keras 3 cannot tell the direction of, ...)
gets a note with the manual fix and is left alone; code that works but deserves a word (``cluster_resolver.task_id``)
gets an advice note that is not counted as a manual edit.

Names are resolved through the script's imports (LibCST's QualifiedNameProvider): ``tf``
is whatever the script imported as ``tf``. Formatting and comments elsewhere are kept.
"""

import re

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import (
    ExpressionContext,
    ExpressionContextProvider,
    PositionProvider,
    QualifiedNameProvider,
)

from tfring._migrate import rules, text_rules
from tfring._migrate.modules import (
    longest_module,
    missing_module_note,
    module_rule,
    rewritten_module,
    tfring_modules,
    unsupported_module,
)
from tfring._migrate.text_rules import Note


def _expression(dotted):
    return cst.parse_expression(dotted)


def _qualified_names(visitor, node):
    return {q.name for q in visitor.get_metadata(QualifiedNameProvider, node, set())}


def _is_tf1_name(qualified):
    return qualified.startswith("tensorflow.compat.v1.") or rules.removed_api_fix(qualified) is not None


class _Bindings(cst.CSTVisitor):
    """What the script binds each plain name to, read before rewriting: ``kinds[name]`` is
    ``"keras"`` when every assignment to it is a Keras optimizer (a constructor, a
    ``DistributedOptimizer`` of one, ``x.optimizer``), ``"tf1"`` when every one is a TF1
    optimizer (``tf.train.AdamOptimizer``, ``tf.compat.v1.train...``), ``None`` otherwise
    (also for a name that is a function parameter somewhere). ``tf1`` is True when the
    script uses TF1 API anywhere. ``horovod_run`` lists the lines calling ``horovod.run``;
    ``only_horovod_run`` is True when the name ``horovod`` is used for nothing else (but
    ``horovod.spark``, rewritten to ``tfring.spark``): ``import horovod`` -> ``import tfring``."""
    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider)

    def __init__(self):
        super().__init__()
        self._seen = {}  # name -> set of kinds assigned to it
        self.tf1 = False
        self.horovod_run = []
        self._horovod_attributes = set()
        self._strings = {}  # name -> set of string values assigned to it (None: not a literal)
        self._values = {}  # name -> the expressions assigned to it (None: bound otherwise, a parameter)
        self.mentions_tf_config = False  # the string "TF_CONFIG" appears in the script
        self.h5_literal = False  # a string ending in .h5 (not .weights.h5) appears in the script

    @property
    def strings(self):
        """{name: its string value} for names whose every assignment is the same string."""
        return {name: next(iter(values)) for name, values in self._strings.items()
                if len(values) == 1 and None not in values}

    def visit_SimpleString(self, node):
        value = _string_value(node)
        self.mentions_tf_config = self.mentions_tf_config or value == "TF_CONFIG"
        self.h5_literal = self.h5_literal or _is_h5(value)

    def visit_FormattedStringText(self, node):
        self.h5_literal = self.h5_literal or _is_h5(node.value)

    @property
    def values(self):
        """{name: its expression} for names bound once, by an assignment."""
        return {name: values[0] for name, values in self._values.items() if len(values) == 1 and values[0] is not None}

    @property
    def kinds(self):
        return {name: next(iter(kinds)) if len(kinds) == 1 else None for name, kinds in self._seen.items()}

    def _bind(self, target, kind, value=None):
        if isinstance(target, cst.Name):
            self._seen.setdefault(target.value, set()).add(kind)
            self._strings.setdefault(target.value, set()).add(
                _string_value(value) if isinstance(value, cst.SimpleString) else None)
            self._values.setdefault(target.value, []).append(value)

    def visit_Assign(self, node):
        kind = self.kind_of(node.value)
        for target in node.targets:
            self._bind(target.target, kind, node.value)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self._bind(node.target, self.kind_of(node.value), node.value)

    @property
    def only_horovod_run(self):
        return bool(self.horovod_run) and "run" in self._horovod_attributes <= {"run", "spark"}

    def visit_Import(self, node):
        return False

    def visit_ImportFrom(self, node):
        return False

    def visit_Param(self, node):
        self._bind(node.name, "other")

    def visit_WithItem(self, node):
        if node.asname is not None:  # `with h5py.File(path, "w") as f:` binds f to an open file
            self._bind(node.asname.name, self.kind_of(node.item))

    def visit_Name(self, node):
        self.tf1 = self.tf1 or any(_is_tf1_name(q) for q in _qualified_names(self, node))

    def visit_Attribute(self, node):
        self.tf1 = self.tf1 or any(_is_tf1_name(q) for q in _qualified_names(self, node))
        if isinstance(node.value, cst.Name) and node.value.value == "horovod":
            self._horovod_attributes.add(node.attr.value)

    def visit_Call(self, node):
        if "horovod.run" in _qualified_names(self, node.func):
            self.horovod_run.append(self.get_metadata(PositionProvider, node).start.line)

    def kind_of(self, value):
        """"keras", "tf1" or "other" for an assigned expression."""
        if isinstance(value, cst.Attribute) and value.attr.value == "optimizer":
            return "keras"
        if isinstance(value, cst.Name):
            kinds = self._seen.get(value.value, set())
            return next(iter(kinds)) if len(kinds) == 1 else "other"
        if not isinstance(value, cst.Call):
            return "other"
        last = (get_full_name_for_node(value.func) or "").rsplit(".", 1)[-1]
        if last == "DistributedOptimizer" and value.args:
            return self.kind_of(value.args[0].value)
        if _qualified_names(self, value.func) & rules.CHECKPOINT_CLASSES:
            return "checkpoint"
        if _qualified_names(self, value.func) & rules.FILE_OBJECT_CALLS:
            return "file"
        if any(q.startswith(("tensorflow.train.", "tensorflow.compat.v1.train.")) and q.endswith("Optimizer")
               for q in _qualified_names(self, value.func)):
            return "tf1"
        if last in rules.OPTIMIZER_CLASSES or (get_full_name_for_node(value.func) or "").endswith("optimizers.get"):
            return "keras"
        return "other"


class _Rewriter(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider, ExpressionContextProvider)

    def __init__(self, bindings):
        super().__init__()
        self._kinds = bindings.kinds
        self._tf1_script = bindings.tf1
        self._horovod_run = bindings.horovod_run
        self._rewrite_horovod_run = bindings.only_horovod_run
        self._strings = bindings.strings
        self._values = bindings.values
        self._mentions_tf_config = bindings.mentions_tf_config
        self._h5_literal = bindings.h5_literal
        self._catching = [False]  # innermost block: a try body whose handlers catch ValueError
        self._lr_as_variable = set()  # `.lr` Attribute nodes used as a variable (x.lr.assign(...))
        self.notes = []
        self.needs_tfring_import = False
        self._module_chains = {}  # Attribute node (original) -> the tfring module replacing it
        self._claimed = set()  # Attribute nodes inside a chain already marked
        self._removed_seen = set()
        self._legacy_imported = set()  # qualified names whose import was moved to tf.keras
        self._backend_calls = set()  # func nodes of K.get_value/K.set_value calls rewritten

    # ---- helpers ---------------------------------------------------------------------

    def _line(self, node):
        return self.get_metadata(PositionProvider, node).start.line

    def _note(self, node, message, rewritten, advice=False):
        self.notes.append(Note(self._line(node), message, rewritten, advice))

    def _qualified(self, node):
        return _qualified_names(self, node)

    def _receiver_kind(self, node):
        """"keras", "tf1" or None (not known) for the object an attribute is read from."""
        if isinstance(node, cst.Attribute) and node.attr.value == "optimizer":
            return "keras"
        if isinstance(node, cst.Name):
            kind = self._kinds.get(node.value)
            return kind if kind in ("keras", "tf1") else None
        return None

    # ---- imports and horovod.* dotted names -----------------------------------------

    def visit_Import(self, node):
        return False  # leave_Import rewrites the names; the dotted-name rule stays out

    def visit_ImportFrom(self, node):
        return False

    def leave_Import(self, original_node, updated_node):
        names = []
        for alias in updated_node.names:
            full = get_full_name_for_node(alias.name)
            new = rewritten_module(full)
            why = unsupported_module(full)
            if why is not None:
                self._note(original_node, f"import {full}: {why}", False)
            elif new is not None and new not in tfring_modules():
                self._note(original_node, "import " + missing_module_note(full, new), False)
            elif new is not None:
                alias = alias.with_changes(name=_expression(new))
                self._note(original_node, f"import {full} -> import {new}", True)
            elif full == "horovod" and alias.asname is None and self._rewrite_horovod_run:
                self._note(original_node, "import horovod -> import tfring (used only for horovod.run)", True)
                alias = alias.with_changes(name=cst.Name("tfring"))
            elif full == "horovod" and self._horovod_run:
                lines = ", ".join(map(str, self._horovod_run))
                self._note(original_node, f"import horovod: the script uses it for horovod.run (line {lines}), "
                                          "which tfringrun replaces: delete this import with that call", False)
            elif full == "horovod":
                self._note(original_node, "import horovod: import tfring.tensorflow or tfring.keras instead", False)
            names.append(alias)
        if not names:
            return cst.RemoveFromParent()
        names[-1] = names[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated_node.with_changes(names=names)

    def leave_ImportFrom(self, original_node, updated_node):
        if updated_node.relative or updated_node.module is None:
            return updated_node
        module = get_full_name_for_node(updated_node.module)
        if module == rules.LEGACY_IMAGE_MODULE:
            return self._legacy_image_import(original_node, updated_node)
        if not (module == "horovod" or module.startswith("horovod.")):
            return updated_node
        why = unsupported_module(module)
        if why is not None and not isinstance(updated_node.names, cst.ImportStar) and all(
                f"{module}.{get_full_name_for_node(alias.name)}" in rules.MODULES for alias in updated_node.names):
            why = None  # `from horovod.spark.tensorflow import compute_worker`: each name is a module with a row
        if why is not None or isinstance(updated_node.names, cst.ImportStar):
            why = why or "import the names you need from tfring.tensorflow or tfring.keras"
            self._note(original_node, f"from {module} import ...: {why}", False)
            return updated_node
        # Each imported name is either a module itself (`from horovod import tensorflow`,
        # `from horovod.tensorflow import keras`) or an attribute of `module`.
        parents, aliases = set(), []
        for alias in updated_node.names:
            name = get_full_name_for_node(alias.name)
            full = module + "." + name
            why = unsupported_module(full)
            if why is not None:  # `from horovod.tensorflow import data`: a module tfring lacks
                self._note(original_node, f"from {module} import {name}: {why}", False)
                return updated_node
            if module == "horovod" and name in rules.HOROVOD_TOP_LEVEL:  # from horovod import run
                parent = rules.HOROVOD_TOP_LEVEL[name]
            elif full in rules.MODULES:
                parent, leaf = rules.MODULES[full].rsplit(".", 1)
                if leaf != name and alias.asname is None:  # keep the name the script uses
                    alias = alias.with_changes(asname=cst.AsName(name=cst.Name(name)))
                alias = alias.with_changes(name=cst.Name(leaf))
            else:
                key = longest_module(module)
                parent = None if key is None else rules.MODULES[key] + module[len(key):]
            parents.add(parent)
            aliases.append(alias)
        if len(parents) != 1 or None in parents:
            self._note(original_node, f"from {module} import ...: no single tfring module has these names; "
                                      "import them from tfring.tensorflow or tfring.keras", False)
            return updated_node
        new = parents.pop()
        if new not in tfring_modules():
            self._note(original_node, "from " + missing_module_note(module, new) + " import ...", False)
            return updated_node
        self._note(original_node, f"from {module} import -> from {new} import", True)
        return updated_node.with_changes(module=_expression(new), names=aliases)

    def _legacy_image_import(self, original_node, updated_node):
        if isinstance(updated_node.names, cst.ImportStar):
            return updated_node
        names = {get_full_name_for_node(alias.name) for alias in updated_node.names}
        legacy = sorted(names & rules.LEGACY_IMAGE_NAMES)
        if not legacy:
            return updated_node
        self._legacy_imported.update(f"{rules.LEGACY_IMAGE_MODULE}.{name}" for name in legacy)
        self._note(original_node, f"from {rules.LEGACY_IMAGE_MODULE} import {', '.join(legacy)} -> from "
                                  f"{rules.LEGACY_IMAGE_REPLACEMENT} import (Keras 3 keeps Keras 2's "
                                  "version only there)", True)
        return updated_node.with_changes(module=_expression(rules.LEGACY_IMAGE_REPLACEMENT))

    def visit_Call(self, node):
        qualified = self._qualified(node.func)
        if qualified & rules.BACKEND_VALUE_CALLS and not any(a.keyword is not None or a.star for a in node.args) \
                and len(node.args) == (2 if any(q.endswith("set_value") for q in qualified) else 1):
            self._backend_calls.add(node.func)
        if (isinstance(node.func, cst.Attribute) and node.func.attr.value in ("assign", "assign_add", "numpy")
                and isinstance(node.func.value, cst.Attribute) and node.func.value.attr.value == "lr"):
            self._lr_as_variable.add(node.func.value)
        return True

    def visit_Attribute(self, node):
        # Top-down: the outermost node of a dotted chain comes first and marks the inner
        # node to replace (horovod.tensorflow.keras.X marks horovod.tensorflow.keras).
        full = get_full_name_for_node(node)
        if full and full.startswith("horovod.") and node not in self._claimed:
            key, why = module_rule(full)
            if why is not None:
                self._claim_unsupported(node, key, why)
            elif key is not None:
                self._mark_chain(node, key)
        return True

    def _claim_unsupported(self, node, key, why):
        """A dotted use of a Horovod module tfring lacks: listed once, left as written."""
        self._note(node, f"{key}: {why}", False)
        while isinstance(node, cst.Attribute):
            self._claimed.add(node)
            node = node.value

    def _mark_chain(self, node, key):
        while isinstance(node, cst.Attribute):
            self._claimed.add(node)  # its inner nodes are part of this chain, not chains of their own
            if get_full_name_for_node(node) == key:
                self._module_chains[node] = rules.MODULES[key]
            node = node.value

    def leave_Attribute(self, original_node, updated_node):
        if original_node in self._module_chains:
            new = self._module_chains[original_node]
            self._note(original_node, f"{get_full_name_for_node(original_node)} -> {new}", True)
            return _expression(new)
        for name in self._qualified(original_node):
            self._note_removed(original_node, name)
        attr = updated_node.attr.value
        if (attr in ("task_type", "task_id") and isinstance(updated_node.value, cst.Attribute)
                and updated_node.value.attr.value == "cluster_resolver"):
            self._note(original_node, f"cluster_resolver.{attr}: {rules.CLUSTER_RESOLVER}", False, advice=True)
        if attr == "lr":
            return self._optimizer_lr(original_node, updated_node)
        return updated_node

    def _optimizer_lr(self, original_node, updated_node):
        """``opt.lr`` -> ``opt.learning_rate`` where ``opt`` is a Keras optimizer (Keras 3 has
        no ``lr``); a note where it may be one (an ``opt``-like name, or ``.lr.assign(...)``)."""
        kind = self._receiver_kind(original_node.value)
        written = get_full_name_for_node(original_node) or ".lr"
        if kind == "keras":
            self._note(original_node, f"{written} -> {written[:-2]}learning_rate (Keras 3 optimizers have no lr)",
                       True)
            return updated_node.with_changes(attr=cst.Name("learning_rate"))
        receiver = (get_full_name_for_node(original_node.value) or "").rsplit(".", 1)[-1]
        if kind is None and (original_node in self._lr_as_variable or _OPTIMIZER_LIKE.search(receiver)):
            self._note(original_node, f"{written}: if {receiver or 'this'} is a Keras optimizer, Keras 3 calls it "
                                      f"{written[:-2]}learning_rate (it has no lr)", False)
        return updated_node

    def leave_Name(self, original_node, updated_node):
        for name in self._qualified(original_node):
            self._note_removed(original_node, name)
        return updated_node

    def _note_removed(self, node, qualified):
        if qualified in self._legacy_imported:
            return  # its import was rewritten: the name works
        if node in self._backend_calls:
            return  # the call is rewritten (leave_Call)
        fix = rules.removed_api_fix(qualified)
        line = self._line(node)
        if fix is not None and (line, qualified) not in self._removed_seen:
            self._removed_seen.add((line, qualified))
            written = get_full_name_for_node(node) or qualified  # as the script spells it
            self.notes.append(Note(line, f"{written}: {fix}", False))

    def leave_Subscript(self, original_node, updated_node):
        # os.environ["TF_CONFIG"] read (not assigned or deleted)
        if ("os.environ" in self._qualified(original_node.value) and len(original_node.slice) == 1
                and isinstance(original_node.slice[0].slice, cst.Index)
                and _is_tf_config(original_node.slice[0].slice.value)
                and self.get_metadata(ExpressionContextProvider, original_node, None) == ExpressionContext.LOAD):
            self._note(original_node, f"os.environ['TF_CONFIG'] {rules.TF_CONFIG_READ}", False)
        return updated_node

    # ---- calls -----------------------------------------------------------------------

    def leave_Call(self, original_node, updated_node):
        func_name = get_full_name_for_node(original_node.func) or ""
        last = func_name.rsplit(".", 1)[-1]
        qualified = self._qualified(original_node.func)
        if qualified & rules.STRATEGIES:
            return self._ring_strategy(original_node, func_name)
        if qualified & rules.BACKEND_VALUE_CALLS:
            return self._backend_value_call(original_node, updated_node, func_name, qualified)
        if "horovod.run" in qualified and not isinstance(updated_node.func, cst.Attribute):
            pass  # run(...) after `from horovod import run`: the import says what became of it
        elif "horovod.run" in qualified and not self._rewrite_horovod_run:
            self._note(original_node, rules.HOROVOD_RUN, False)
        elif "horovod.run" in qualified:
            self._note(original_node, rules.HOROVOD_RUN_REWRITTEN, True)
            updated_node = updated_node.with_changes(func=_expression("tfring.run"))
        if qualified & {"os.environ.get", "os.getenv"} and original_node.args and _is_tf_config(
                original_node.args[0].value):
            self._note(original_node, f"{func_name}('TF_CONFIG') {rules.TF_CONFIG_READ}", False)
        self._keras3_saving(original_node, qualified, last)
        if last in rules.OPTIMIZER_CLASSES:
            updated_node = self._optimizer_keywords(original_node, updated_node, last)
        if last == "DistributedOptimizer":
            for arg in original_node.args:
                if arg.keyword is not None and arg.keyword.value in rules.DISTRIBUTED_OPTIMIZER_UNSUPPORTED_KEYWORDS:
                    why = rules.DISTRIBUTED_OPTIMIZER_UNSUPPORTED_KEYWORDS[arg.keyword.value]
                    self._note(arg, f"DistributedOptimizer({arg.keyword.value}=...): {why}", False)
        if not isinstance(updated_node.func, cst.Attribute):
            return updated_node
        method = updated_node.func.attr.value
        if method in rules.GENERATOR_PARAMETERS:
            updated_node = self._generator_arguments(original_node, updated_node, method)
        if method in rules.MODEL_METHOD_REMOVED_KEYWORDS:
            updated_node = self._drop_keywords(original_node, updated_node, method)
        if method in rules.METHODS and (method != "reset_states" or not updated_node.args):
            new = rules.METHODS[method]
            self._note(original_node, f".{method}() -> .{new}() (Keras 3)", True)
            updated_node = updated_node.with_changes(func=updated_node.func.with_changes(attr=cst.Name(new)))
        if method in rules.CALL_TO_PROPERTY and not updated_node.args:
            return self._call_to_property(original_node, updated_node, method)
        return updated_node

    def _generator_arguments(self, original_node, updated_node, method):
        """Keras 2's ``*_generator`` arguments as Keras 3 keywords: every positional argument
        after the generator gets its Keras 2 name (Keras 3 reads the second as ``y``), and
        ``generator=`` becomes ``x=``. A ``*args`` cannot be mapped: listed, left alone."""
        names = rules.GENERATOR_PARAMETERS[method]
        if any(arg.star for arg in updated_node.args):
            self._note(original_node, f".{method}(*...): Keras 3's {rules.METHODS[method]}() takes x, y, batch_size, "
                                      f"... positionally; pass Keras 2's {', '.join(names[1:3])}, ... as keywords",
                       False)
            return updated_node
        args, moved = [], []
        for index, arg in enumerate(updated_node.args):
            if arg.keyword is None and 0 < index < len(names):
                arg = arg.with_changes(keyword=cst.Name(names[index]), equal=_EQUAL)
                moved.append(names[index])
            elif arg.keyword is not None and arg.keyword.value == "generator":
                arg = arg.with_changes(keyword=cst.Name("x"))
                moved.append("generator -> x")
            args.append(arg)
        if moved:
            self._note(original_node, f".{method}(): positional arguments passed by their Keras 2 names "
                                      f"({', '.join(moved)}), since Keras 3's {rules.METHODS[method]}() reads "
                                      "them as y, batch_size, ...", True)
        return updated_node.with_changes(args=args)

    def _path_value(self, node, seen=()):
        """The string a path expression ends with, when the script tells: a literal, a name
        bound to one literal (every assignment the same) or assigned once one of these
        expressions, an f-string's last text, ``os.path.join(..., last)``, ``a + "literal"``,
        or ``"template{}.keras".format(...)`` (the text after its last field); else None.
        ``seen``: the names being resolved (``p = q; q = p`` ends)."""
        if isinstance(node, cst.SimpleString):
            return _string_value(node)
        if isinstance(node, cst.Name):
            if node.value in self._strings:
                return self._strings[node.value]
            value = self._values.get(node.value)
            return None if value is None or node.value in seen else self._path_value(value, (*seen, node.value))
        if isinstance(node, cst.FormattedString):
            last = node.parts[-1] if node.parts else None
            return last.value if isinstance(last, cst.FormattedStringText) else None
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
            return self._path_value(node.right, seen)
        if isinstance(node, cst.Call) and "os.path.join" in self._qualified(node.func) and node.args:
            return self._path_value(node.args[-1].value, seen)
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "format":
            template = self._path_value(node.func.value, seen)
            return None if template is None else template[template.rfind("}") + 1:] or None
        return None

    def _is_file_object(self, node):
        """Whether a path argument is an open file: ``h5py.File(...)``, ``open(...)``, or a name
        bound only to one (``with h5py.File(p, "w") as f``)."""
        if isinstance(node, cst.Name):
            return self._kinds.get(node.value) == "file"
        return isinstance(node, cst.Call) and bool(self._qualified(node.func) & rules.FILE_OBJECT_CALLS)

    def _is_keras_callback(self, qualified):
        """Whether a call's qualified names say Keras' (or tfring's / Horovod's) callback."""
        return any(q.startswith(rules.KERAS_LOAD_OWNERS) for q in qualified)

    def _check_suffix(self, node, path, suffixes, message):
        """Lists a save to a path that does not end in ``suffixes`` (advice inside a
        ``try`` that catches ValueError: the script expects the failure)."""
        value = None if path is None else self._path_value(path)
        if value is not None and not value.endswith(suffixes):
            caught = self._catching[-1]
            self._note(node, f"save to {value!r}: {message}"
                             + (" (this one is inside `except ValueError`: the script expects it to fail)"
                                if caught else ""), False, advice=caught)

    def _model_checkpoint(self, node, keywords, positional):
        """``ModelCheckpoint(filepath, ...)``: Keras 3 checks the suffix when it is built."""
        path = keywords.get("filepath", positional[0] if positional else None)
        weights_only = keywords.get("save_weights_only", positional[4] if len(positional) > 4 else None)
        if isinstance(weights_only, cst.Name) and weights_only.value == "True":
            self._check_suffix(node, path, rules.WEIGHTS_SUFFIX, rules.CHECKPOINT_WEIGHTS_WITHOUT_SUFFIX)
        else:  # False, or not known here (then .weights.h5 passes too: it ends in .h5)
            self._check_suffix(node, path, rules.CHECKPOINT_SUFFIXES, rules.CHECKPOINT_WITHOUT_SUFFIX)

    def _monitor_mode(self, node, last, keywords, positional):
        """``ReduceLROnPlateau(monitor="val_f1")`` and the other MonitorCallbacks without a
        mode: Keras 3's mode="auto" fails for a name it cannot tell the direction of."""
        monitor_at, mode_at = rules.MONITOR_CALLBACKS[last]
        if "mode" in keywords or len(positional) > mode_at:
            return
        monitor = keywords.get("monitor", positional[monitor_at] if len(positional) > monitor_at else None)
        name = _string_value(monitor) if isinstance(monitor, cst.SimpleString) else None
        if name is not None and name.removeprefix("val_") not in rules.KERAS_DIRECTED_METRICS:
            self._note(node, f"{last}(monitor={name!r}): {rules.MONITOR_AUTO_MODE}", False)

    def _keras3_saving(self, node, qualified, last):
        """Lists Keras 2 saving and loading that fails under Keras 3 (rules.SAVE_*)."""
        args = node.args
        keywords = {a.keyword.value: a.value for a in args if a.keyword is not None}
        positional = [a.value for a in args if a.keyword is None and not a.star]
        if qualified & rules.HUB_KERAS_LAYERS:
            self._note(node, f"{get_full_name_for_node(node.func)}: {rules.HUB_KERAS_LAYER}", False)
            return
        if isinstance(node.func, cst.Attribute) and last == "save_spec":
            self._note(node, f".save_spec(): {rules.SAVE_SPEC}", False)
            return
        if last in rules.MONITOR_CALLBACKS and self._is_keras_callback(qualified):
            self._monitor_mode(node, last, keywords, positional)
            if last == "ModelCheckpoint":
                self._model_checkpoint(node, keywords, positional)
            return
        if qualified & rules.KERAS_SAVE_FUNCTIONS:
            model_save, path = True, keywords.get("filepath", positional[1] if len(positional) > 1 else None)
        elif isinstance(node.func, cst.Attribute) and last in ("save", "save_weights") and self._is_model(
                node.func.value):
            model_save, path = True, keywords.get("filepath", positional[0] if positional else None)
        else:
            model_save, path = False, None
        if model_save and path is not None and self._is_file_object(path):
            self._note(node, f"{last}(<open file>): {rules.SAVE_FILE_OBJECT}", False)
        elif model_save and last == "save_weights":
            if "max_shard_size" not in keywords:
                self._check_suffix(node, path, rules.WEIGHTS_SUFFIX, rules.SAVE_WEIGHTS_WITHOUT_SUFFIX)
            return
        elif model_save:
            self._check_suffix(node, path, rules.KERAS_SAVE_SUFFIXES, rules.SAVE_WITHOUT_SUFFIX)
        if model_save:
            if "options" in keywords:
                self._note(node, f"save(options=...): {rules.SAVE_OPTIONS}", False)
            return
        if last == "load_model" and any(q.startswith(rules.KERAS_LOAD_OWNERS) for q in qualified):
            if "options" in keywords:
                self._note(node, f"load_model(options=...): {rules.LOAD_OPTIONS}", False)
            path = keywords.get("filepath", positional[0] if positional else None)
            value = None if path is None else self._path_value(path)
            if _is_h5(value) or (value is None and self._h5_literal):
                self._note(node, f"load_model: {rules.H5_RESUME}", False)

    # A save that fails under Keras 3 inside ``try: ... except ValueError:`` is what the script
    # expects (TF's save_and_load tutorial shows the error): advice, not a manual edit.
    def visit_Try(self, node):
        self._catching.append(any(_catches_value_error(h) for h in node.handlers))

    def leave_Try(self, original_node, updated_node):
        self._catching.pop()
        return updated_node

    def visit_ExceptHandler(self, node):
        self._catching.append(False)

    def leave_ExceptHandler(self, original_node, updated_node):
        self._catching.pop()
        return updated_node

    def visit_Else(self, node):
        self._catching.append(False)

    def leave_Else(self, original_node, updated_node):
        self._catching.pop()
        return updated_node

    visit_Finally, leave_Finally = visit_Else, leave_Else

    def _is_model(self, receiver):
        """Whether ``receiver.save(...)`` is a Keras model's save: not a tf.train.Checkpoint
        (or manager or saver), and named like a model (``model``, ``self.model``, ``base_model``)."""
        if isinstance(receiver, cst.Name) and self._kinds.get(receiver.value) == "checkpoint":
            return False
        name = (get_full_name_for_node(receiver) or "").rsplit(".", 1)[-1]
        return bool(_MODEL_LIKE.search(name))

    def _call_to_property(self, original_node, updated_node, method):
        """``opt.variables()`` -> ``opt.variables`` for a Keras optimizer; a TF1 optimizer keeps
        the method; in a TF1 script an object of unknown type gets a note instead."""
        kind = self._receiver_kind(original_node.func.value)
        if kind == "tf1":
            return updated_node
        if kind is None and self._tf1_script:
            receiver = get_full_name_for_node(original_node.func.value) or "the object"
            self._note(original_node, f".{method}(): if {receiver} is a Keras optimizer, {method} is a property in "
                                      f"Keras 3 (drop the parentheses); a TF1 optimizer keeps .{method}()", False)
            return updated_node
        self._note(original_node, f".{method}() -> .{method} (a property in Keras 3)", True)
        return updated_node.func

    def _backend_value_call(self, original_node, updated_node, func_name, qualified):
        """``K.set_value(v, x)`` -> ``v.assign(x)``, ``K.get_value(v)`` -> ``v.numpy()``: Keras 3
        variables (tf.keras.backend keeps both functions, but they fail on Keras 3 variables)."""
        if original_node.func not in self._backend_calls:
            return updated_node  # an unusual call: _note_removed lists it
        args = updated_node.args
        target = args[0].value
        if not isinstance(target, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) and not target.lpar:
            target = target.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        if any(q.endswith("set_value") for q in qualified):
            self._note(original_node, f"{func_name}(v, x) -> v.assign(x) (Keras 3 variables)", True)
            return cst.Call(func=cst.Attribute(value=target, attr=cst.Name("assign")),
                            args=[args[1].with_changes(comma=cst.MaybeSentinel.DEFAULT)])
        self._note(original_node, f"{func_name}(v) -> v.numpy() (Keras 3 variables)", True)
        return cst.Call(func=cst.Attribute(value=target, attr=cst.Name("numpy")))

    def _optimizer_keywords(self, original_node, updated_node, cls):
        args = []
        for arg in updated_node.args:
            keyword = arg.keyword.value if arg.keyword is not None else None
            if keyword in rules.OPTIMIZER_KEYWORDS:
                new = rules.OPTIMIZER_KEYWORDS[keyword]
                self._note(original_node, f"{cls}({keyword}=) -> {cls}({new}=)", True)
                arg = arg.with_changes(keyword=cst.Name(new))
            elif keyword in rules.OPTIMIZER_REMOVED_KEYWORDS:
                self._note(original_node, f"{cls}({keyword}=): {rules.OPTIMIZER_REMOVED_KEYWORDS[keyword]}", False)
            args.append(arg)
        return updated_node.with_changes(args=args)

    def _drop_keywords(self, original_node, updated_node, method):
        removed = rules.MODEL_METHOD_REMOVED_KEYWORDS[method]
        kept = []
        for arg in updated_node.args:
            keyword = arg.keyword.value if arg.keyword is not None else None
            if keyword in removed:
                self._note(original_node, f"removed {method}({keyword}=...): {removed[keyword]}", True)
            else:
                kept.append(arg)
        if len(kept) == len(updated_node.args):
            return updated_node
        if kept:  # the new last argument takes the removed one's trailing comma (or none)
            kept[-1] = kept[-1].with_changes(comma=updated_node.args[-1].comma)
        return updated_node.with_changes(args=kept)

    def _ring_strategy(self, original_node, func_name):
        self.needs_tfring_import = True
        dropped = " (its arguments dropped: RingStrategy takes none of them)" if original_node.args else ""
        multi_worker = any("MultiWorker" in q for q in self._qualified(original_node.func))
        launch = (rules.STRATEGY_LAUNCH_MULTI_WORKER if multi_worker or self._mentions_tf_config
                  else rules.STRATEGY_LAUNCH_MIRRORED)
        self._note(original_node, f"{func_name}() -> tfring.RingStrategy(){dropped}; {launch}", True)
        return _expression("tfring.RingStrategy()")

    # ---- strings (comments are left as written: they run nothing) ---------------------

    def _rewrite_text(self, original_node, updated_node):
        value, notes = text_rules.rewrite_text(updated_node.value, self._line(original_node))
        self.notes += notes
        return updated_node.with_changes(value=value) if notes else updated_node

    leave_SimpleString = leave_FormattedStringText = _rewrite_text


_OPTIMIZER_LIKE = re.compile(r"(^|_)opt(_|$|\d)|optim", re.IGNORECASE)  # opt, opt2, base_opt, optimizer
_MODEL_LIKE = re.compile(r"model", re.IGNORECASE)  # model, self.model, base_model, keras_model
_EQUAL = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))


def _string_value(node):
    """A plain string literal's value; None for bytes or anything else."""
    try:
        value = node.evaluated_value
    except Exception:  # noqa: BLE001 - LibCST raises for strings it cannot evaluate
        return None
    return value if isinstance(value, str) else None


def _catches_value_error(handler):
    """Whether an ``except`` clause catches ValueError (bare, ValueError, Exception, ...)."""
    if handler.type is None:
        return True
    types = handler.type.elements if isinstance(handler.type, cst.Tuple) else [cst.Element(handler.type)]
    names = {(get_full_name_for_node(t.value) or "").rsplit(".", 1)[-1] for t in types}
    return bool(names & {"ValueError", "Exception", "BaseException"})


def _is_h5(value):
    return isinstance(value, str) and value.endswith(".h5") and not value.endswith(".weights.h5")


def _is_tf_config(node):
    return isinstance(node, cst.SimpleString) and node.evaluated_value == "TF_CONFIG"


def _imports_tfring(module):
    for statement in module.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Import) and any(  # `import tfring.keras` binds tfring too
                        get_full_name_for_node(a.name).split(".")[0] == "tfring" and a.asname is None
                        for a in small.names):
                    return True
    return False


def _is_docstring(statement):
    return (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
            and isinstance(statement.body[0], cst.Expr)
            and isinstance(statement.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def _add_tfring_import(module):
    """``import tfring`` after the leading block of imports (after the module docstring and
    ``__future__`` imports at least; never after a statement that runs code, such as a
    ``print()``)."""
    position = 1 if module.body and _is_docstring(module.body[0]) else 0
    for index in range(position, len(module.body)):
        statement = module.body[index]
        if isinstance(statement, cst.SimpleStatementLine) and all(
                isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body):
            position = index + 1
        else:
            break
    line = cst.parse_statement("import tfring\n")
    return module.with_changes(body=[*module.body[:position], line, *module.body[position:]])


def rewrite(source):
    """Returns (new_source, notes) for one script's text. Raises ``libcst.ParserSyntaxError``
    for text that is not Python."""
    wrapper = cst.MetadataWrapper(cst.parse_module(source))
    bindings = _Bindings()
    wrapper.visit(bindings)
    rewriter = _Rewriter(bindings)
    new = wrapper.visit(rewriter)
    if rewriter.needs_tfring_import and not _imports_tfring(new):
        new = _add_tfring_import(new)
    notes = sorted(dict.fromkeys(rewriter.notes), key=lambda n: n.line)  # stable: a line keeps its order
    return new.code, notes
