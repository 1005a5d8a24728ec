"""Rewrites one Python script's mechanical edits on its LibCST syntax tree.

What it changes (each with a note): Horovod imports and dotted uses -> tfring; Keras 2
optimizer ``lr=`` -> ``learning_rate=``; ``fit_generator``/``evaluate_generator``/
``predict_generator``/``reset_states`` -> their Keras 3 names; ``opt.variables()`` ->
``opt.variables``; ``model.optimizer.lr`` -> ``model.optimizer.learning_rate``; Keras-2-only
keyword arguments of ``compile``/``fit``/... removed; ``tf.distribute`` multi-worker
strategies -> ``tfring.RingStrategy()``; ``horovodrun`` lines and ``HOROVOD_*`` names in
comments and strings. What it cannot change (TF1 sessions, ``tf.estimator``,
``ImageDataGenerator``, ...) gets a note with the manual fix and is left alone.

Names are resolved through the script's imports (LibCST's QualifiedNameProvider): ``tf``
is whatever the script imported as ``tf``. Formatting and comments elsewhere are kept.
"""

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import PositionProvider, QualifiedNameProvider

from tfring.migrate import rules, text_rules
from tfring.migrate.text_rules import Note


def _longest_module(name):
    """The longest ``rules.MODULES`` key that is ``name`` or a dotted prefix of it."""
    best = None
    for key in rules.MODULES:
        if (name == key or name.startswith(key + ".")) and (best is None or len(key) > len(best)):
            best = key
    return best


def _unsupported_module(name):
    for key, why in rules.UNSUPPORTED_MODULES.items():
        if name == key or name.startswith(key + "."):
            return why
    return None


def _expression(dotted):
    return cst.parse_expression(dotted)


class _Rewriter(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider)

    def __init__(self):
        super().__init__()
        self.notes = []
        self.needs_tfring_import = False
        self._module_chains = {}  # Attribute node (original) -> the tfring module replacing it
        self._claimed = set()  # Attribute nodes inside a chain already marked
        self._removed_seen = set()

    # ---- helpers ---------------------------------------------------------------------

    def _line(self, node):
        return self.get_metadata(PositionProvider, node).start.line

    def _note(self, node, message, rewritten):
        self.notes.append(Note(self._line(node), message, rewritten))

    def _qualified(self, node):
        return {q.name for q in self.get_metadata(QualifiedNameProvider, node, set())}

    # ---- imports and horovod.* dotted names -----------------------------------------

    def visit_Import(self, node):
        return False  # leave_Import rewrites the names; the dotted-name rule stays out

    def visit_ImportFrom(self, node):
        return False

    def leave_Import(self, original_node, updated_node):
        names = []
        for alias in updated_node.names:
            full = get_full_name_for_node(alias.name)
            key = _longest_module(full)
            why = _unsupported_module(full)
            if why is not None:
                self._note(original_node, f"import {full}: {why}", False)
            elif key is not None:
                new = rules.MODULES[key] + full[len(key):]
                alias = alias.with_changes(name=_expression(new))
                self._note(original_node, f"import {full} -> import {new}", True)
            elif full == "horovod":
                self._note(original_node, "import horovod: import tfring.tensorflow or tfring.keras instead", False)
            names.append(alias)
        return updated_node.with_changes(names=names)

    def leave_ImportFrom(self, original_node, updated_node):
        if updated_node.relative or updated_node.module is None:
            return updated_node
        module = get_full_name_for_node(updated_node.module)
        if not (module == "horovod" or module.startswith("horovod.")):
            return updated_node
        why = _unsupported_module(module)
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
            if full in rules.MODULES:
                parent, leaf = rules.MODULES[full].rsplit(".", 1)
                if leaf != name and alias.asname is None:  # keep the name the script uses
                    alias = alias.with_changes(asname=cst.AsName(name=cst.Name(name)))
                alias = alias.with_changes(name=cst.Name(leaf))
            else:
                key = _longest_module(module)
                parent = None if key is None else rules.MODULES[key] + module[len(key):]
            parents.add(parent)
            aliases.append(alias)
        if len(parents) != 1 or None in parents:
            self._note(original_node, f"from {module} import ...: no single tfring module has these names; "
                                      "import them from tfring.tensorflow or tfring.keras", False)
            return updated_node
        new = parents.pop()
        self._note(original_node, f"from {module} import -> from {new} import", True)
        return updated_node.with_changes(module=_expression(new), names=aliases)

    def visit_Attribute(self, node):
        # Top-down: the outermost node of a dotted chain comes first and marks the inner
        # node to replace (horovod.tensorflow.keras.X marks horovod.tensorflow.keras).
        full = get_full_name_for_node(node)
        if full and full.startswith("horovod.") and node not in self._claimed:
            key = _longest_module(full)
            if key is not None:
                self._mark_chain(node, key)
        return True

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
        if (updated_node.attr.value == "lr" and isinstance(updated_node.value, cst.Attribute)
                and updated_node.value.attr.value == "optimizer"):
            self._note(original_node, "optimizer.lr -> optimizer.learning_rate (Keras 3)", True)
            return updated_node.with_changes(attr=cst.Name("learning_rate"))
        return updated_node

    def leave_Name(self, original_node, updated_node):
        for name in self._qualified(original_node):
            self._note_removed(original_node, name)
        return updated_node

    def _note_removed(self, node, qualified):
        fix = rules.REMOVED_API.get(qualified)
        line = self._line(node)
        if fix is not None and (line, qualified) not in self._removed_seen:
            self._removed_seen.add((line, qualified))
            written = get_full_name_for_node(node) or qualified  # as the script spells it
            self.notes.append(Note(line, f"{written}: {fix}", False))

    # ---- calls -----------------------------------------------------------------------

    def leave_Call(self, original_node, updated_node):
        func_name = get_full_name_for_node(original_node.func) or ""
        last = func_name.rsplit(".", 1)[-1]
        if self._qualified(original_node.func) & rules.STRATEGIES:
            return self._ring_strategy(original_node, func_name)
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
        if method in rules.MODEL_METHOD_REMOVED_KEYWORDS:
            updated_node = self._drop_keywords(original_node, updated_node, method)
        if method in rules.METHODS and (method != "reset_states" or not updated_node.args):
            new = rules.METHODS[method]
            self._note(original_node, f".{method}() -> .{new}() (Keras 3)", True)
            updated_node = updated_node.with_changes(func=updated_node.func.with_changes(attr=cst.Name(new)))
        if method in rules.CALL_TO_PROPERTY and not updated_node.args:
            self._note(original_node, f".{method}() -> .{method} (a property in Keras 3)", True)
            return updated_node.func
        return updated_node

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
        self._note(original_node, f"{func_name}() -> tfring.RingStrategy(){dropped}; launch with "
                                  "tfringrun, which replaces TF_CONFIG", True)
        return _expression("tfring.RingStrategy()")

    # ---- comments and strings --------------------------------------------------------

    def _rewrite_text(self, original_node, updated_node):
        value, notes = text_rules.rewrite_text(updated_node.value, self._line(original_node))
        self.notes += notes
        return updated_node.with_changes(value=value) if notes else updated_node

    leave_Comment = leave_SimpleString = leave_FormattedStringText = _rewrite_text


def _imports_tfring(module):
    for statement in module.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Import) and any(  # `import tfring.keras` binds tfring too
                        get_full_name_for_node(a.name).split(".")[0] == "tfring" and a.asname is None
                        for a in small.names):
                    return True
    return False


def _add_tfring_import(module):
    """``import tfring`` after the leading block of imports (after the docstring and
    ``__future__`` imports at least)."""
    position = 0
    for index, statement in enumerate(module.body):
        if isinstance(statement, cst.SimpleStatementLine) and all(
                isinstance(s, (cst.Import, cst.ImportFrom, cst.Expr)) for s in statement.body):
            position = index + 1
        else:
            break
    line = cst.parse_statement("import tfring\n")
    return module.with_changes(body=[*module.body[:position], line, *module.body[position:]])


def rewrite(source):
    """Returns (new_source, notes) for one script's text. Raises ``libcst.ParserSyntaxError``
    for text that is not Python."""
    module = cst.parse_module(source)
    rewriter = _Rewriter()
    new = cst.MetadataWrapper(module).visit(rewriter)
    if rewriter.needs_tfring_import and not _imports_tfring(new):
        new = _add_tfring_import(new)
    notes = sorted(dict.fromkeys(rewriter.notes), key=lambda n: n.line)  # stable: a line keeps its order
    return new.code, notes
