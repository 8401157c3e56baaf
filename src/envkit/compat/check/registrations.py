"""Names vLLM registers with transformers' auto classes that the target release already owns.

vLLM registers its own config classes (``AutoConfig.register("aimv2", AIMv2Config)``) and
processors (``AutoProcessor.register(...)``, ``AutoImageProcessor``, ``AutoTokenizer``...)
when their modules load. transformers refuses a name it owns unless ``exist_ok=True``:

- ``AutoConfig.register(model_type, ...)`` writes into ``CONFIG_MAPPING``, whose ``register``
  raises ``ValueError`` when the model type is in ``CONFIG_MAPPING_NAMES``;
- the others write into a ``_LazyAutoMapping``, whose ``register`` raises when the key is a
  class whose ``__name__`` is a config class of ``CONFIG_MAPPING_NAMES`` and that config's
  model type is in the mapping's own table (a string key never clashes).

A call that cannot raise is left out: ``exist_ok=True``, inside ``try`` catching ValueError
or ``contextlib.suppress(ValueError)``, or on a line the guards rule out for the release.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from packaging.version import Version

from envkit import syntax
from envkit.releases.asttables import SourceError, module_tables

REGISTERS = re.compile(rb"\bAuto\w*\.register\(")
_CAUGHT = {"ValueError", "Exception", "BaseException"}


@dataclass(frozen=True)
class Registration:
    kind: str  # the auto class: AutoConfig, AutoProcessor, ...
    key: str  # the model type (AutoConfig) or the config class's name
    by_class: bool  # the key is a class (its __name__ counts), not a string
    file: str
    line: int


def registrations(
    tree: ast.Module, path: str, dead: Callable[[int], bool] = lambda _l: False
) -> list[Registration]:
    """The auto-class registrations in ``tree`` that can raise (see the module docstring)."""
    autos = _auto_names(tree)
    if not autos:
        return []
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    imported = _imported_names(tree)
    caught = _caught_lines(tree)
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr != "register" or not isinstance(node.func.value, ast.Name):
            continue
        kind = autos.get(node.func.value.id)
        if kind is None or not node.args or dead(node.lineno):
            continue
        if any(a <= node.lineno <= b for a, b in caught) or _exist_ok(node):
            continue
        key, by_class = _key(node.args[0], classes, imported)
        if key and (kind == "AutoConfig") != by_class:
            out.append(Registration(kind, key, by_class, path, node.lineno))
    return out


def _auto_names(tree: ast.Module) -> dict[str, str]:
    """Local name -> transformers auto class, for ``from transformers... import AutoX``."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "transformers":
            for alias in node.names:
                if alias.name.startswith("Auto"):
                    out[alias.asname or alias.name] = alias.name
    return out


def _imported_names(tree: ast.Module) -> dict[str, str]:
    return {
        alias.asname or alias.name: alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


def _caught_lines(tree: ast.Module) -> list[tuple[int, int]]:
    """Blocks whose ValueError is caught: ``try/except ValueError`` and
    ``with contextlib.suppress(ValueError)``."""
    out = []
    for node in ast.walk(tree):
        body: Sequence[ast.stmt] = ()
        if (isinstance(node, ast.Try) and any(_names(h.type) & _CAUGHT for h in node.handlers)) or (
            isinstance(node, ast.With) and any(_suppresses(i.context_expr) for i in node.items)
        ):
            body = node.body
        if body:
            out.append((body[0].lineno, body[-1].end_lineno or body[-1].lineno))
    return out


def _names(node: ast.expr | None) -> set[str]:
    if node is None:
        return {"BaseException"}
    kinds = node.elts if isinstance(node, ast.Tuple) else [node]
    return {k.id if isinstance(k, ast.Name) else getattr(k, "attr", "") for k in kinds}


def _suppresses(node: ast.expr) -> bool:
    if not isinstance(node, ast.Call):
        return False
    called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
    return called == "suppress" and any(_names(a) & _CAUGHT for a in node.args)


def _exist_ok(call: ast.Call) -> bool:
    return any(
        k.arg == "exist_ok" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
        for k in call.keywords
    )


def _key(
    node: ast.expr, classes: Mapping[str, ast.ClassDef], imported: Mapping[str, str]
) -> tuple[str, bool]:
    """The registered key: a string (a literal, or ``Cls.model_type`` read from the class
    body) or a class's ``__name__``; ('', False) when the source cannot tell."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value, False
    if isinstance(node, ast.Attribute) and node.attr == "model_type":
        owner = node.value
        cls = classes.get(owner.id) if isinstance(owner, ast.Name) else None
        return (_class_string(cls, "model_type"), False) if cls else ("", False)
    if isinstance(node, ast.Name):
        if node.id in classes:
            return node.id, True
        if node.id in imported:
            return imported[node.id], True
    return "", False


def _class_string(cls: ast.ClassDef, name: str) -> str:
    for item in cls.body:
        targets = item.targets if isinstance(item, ast.Assign) else []
        if isinstance(item, ast.AnnAssign):
            targets = [item.target]
        value = getattr(item, "value", None)
        named = any(isinstance(t, ast.Name) and t.id == name for t in targets)
        if named and isinstance(value, ast.Constant) and isinstance(value.value, str):
            return value.value
    return ""


@dataclass(frozen=True)
class Tables:
    """What the target release owns: its model types, and (read only when a registration is
    keyed by a class) its auto modules, for ``CONFIG_MAPPING_NAMES`` and each auto class's
    table."""

    model_types: frozenset[str]
    auto_modules: Callable[[], Mapping[str, bytes]]  # transformers/models/auto/*.py

    def clashes(self, registration: Registration) -> bool | None:
        """Whether the registration raises with this release (None: cannot be told)."""
        if not registration.by_class:
            return registration.key in self.model_types
        texts = self.auto_modules()
        names = _config_names(texts)
        if names is None:
            return None
        reverse = {v: k for k, v in names.items() if isinstance(v, str)}
        model_type = reverse.get(registration.key)
        if model_type is None:
            return False
        table = auto_table(registration.kind, texts)
        return None if table is None else model_type in table


def _config_names(texts: Mapping[str, bytes]) -> Mapping[str, object] | None:
    path = next((p for p in texts if p.endswith("/configuration_auto.py")), "")
    return _evaluate(path, "CONFIG_MAPPING_NAMES", texts) if path else None


def first_owner(
    key: str, releases: Sequence[Version], owns: Callable[[Version], bool | None]
) -> str:
    """The first of ``releases`` (oldest first, the last of which owns ``key``) that owns it,
    by bisection: a name stays in transformers' tables from the release adding it. ''
    when a step cannot tell."""
    if not releases:
        return ""
    low, high = -1, len(releases) - 1  # releases[high] owns it; releases[low] does not
    while high - low > 1:
        mid = (low + high) // 2
        answer = owns(releases[mid])
        if answer is None:
            return ""
        if answer:
            high = mid
        else:
            low = mid
    return str(releases[high])


def auto_table(kind: str, texts: Mapping[str, bytes]) -> Mapping[str, object] | None:
    """The table of model types auto class ``kind`` registers into, read from the auto
    modules (``texts``: ``transformers/models/auto/*.py``): the class's ``_model_mapping = X``
    or ``X.register(...)`` in its ``register``, then ``X = _LazyAutoMapping(CONFIG_MAPPING_NAMES,
    TABLE)`` and TABLE evaluated as data. None when the source does not say."""
    trees = {path: tree for path, text in texts.items() if (tree := _parse(text)) is not None}
    mapping = next(
        (
            found
            for tree in trees.values()
            for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef) and node.name == kind
            if (found := _mapping_of(node))
        ),
        "",
    )
    for path, tree in trees.items():
        for node in tree.body if mapping else ():
            named = any(
                isinstance(t, ast.Name) and t.id == mapping for t in getattr(node, "targets", ())
            )
            call = getattr(node, "value", None)
            if named and isinstance(call, ast.Call) and len(call.args) == 2:
                second = call.args[1]
                return _evaluate(path, second.id, texts) if isinstance(second, ast.Name) else None
    return None


def _evaluate(path: str, table: str, texts: Mapping[str, bytes]) -> Mapping[str, object] | None:
    mappings = next((p for p in texts if p.endswith("/auto_mappings.py")), "")
    try:
        imports = (
            {"auto_mappings": module_tables(texts[mappings].decode("utf-8", "replace"))}
            if mappings
            else {}
        )
        found = module_tables(
            texts[path].decode("utf-8", "replace"), imports=imports, filename=path
        )
    except SourceError:
        return None
    value = found.get(table)
    if not isinstance(value, dict) and mappings:
        value = imports["auto_mappings"].get(table)
    return value if isinstance(value, dict) else None


def _mapping_of(cls: ast.ClassDef) -> str:
    for item in cls.body:
        if (
            isinstance(item, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "_model_mapping" for t in item.targets)
            and isinstance(item.value, ast.Name)
        ):
            return item.value.id
        if isinstance(item, ast.FunctionDef) and item.name == "register":
            for sub in ast.walk(item):
                if (
                    isinstance(sub, ast.Call)
                    and isinstance(sub.func, ast.Attribute)
                    and sub.func.attr == "register"
                    and isinstance(sub.func.value, ast.Name)
                ):
                    return sub.func.value.id
    return ""


def _parse(text: bytes) -> ast.Module | None:
    try:
        return syntax.parse_module(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def describe(registration: Registration, transformers: str) -> str:
    """What happens at run time, in one line."""
    if registration.by_class:
        return (
            f"{registration.kind}.register raises ValueError when the module loads: transformers "
            f"{transformers} maps the config class {registration.key} itself"
        )
    return (
        f"AutoConfig.register raises ValueError when the module loads: transformers "
        f"{transformers} defines model type {registration.key!r} itself"
    )
