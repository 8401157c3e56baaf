"""Config dataclasses read as vLLM's ``get_kwargs`` reads them: each field's arity from its
annotation (a bool is ``--x``/``--no-x``, a list one or more values, ``bool | str | None`` an
optional one, a dataclass a JSON value), fields of base classes first, and what a class's
``_customize_cli_kwargs`` changes. Read with ``ast`` from the wheel's source, never imported.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping

from envkit import syntax

SWITCHES = {"store_true", "store_false", "store_const", "count", "help", "version"}


class Classes:
    """Every class of the modules read, for dataclass fields (with their bases' first)."""

    def __init__(self, trees: Mapping[str, ast.Module]) -> None:
        self.defs: dict[str, ast.ClassDef] = {}
        self._fields: dict[str, dict[str, ast.expr] | None] = {}
        for tree in trees.values():
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    self.defs.setdefault(node.name, node)

    def fields(self, name: str, depth: int = 0) -> dict[str, ast.expr] | None:
        """Field name -> annotation of dataclass ``name`` (None: a class envkit has not read)."""
        if name not in self._fields:
            self._fields[name] = self._read_fields(name, depth)
        return self._fields[name]

    def subclasses(self, name: str) -> set[str]:
        """``name`` and every class read that derives from it."""
        found = {name}
        for _round in range(10):
            more = {
                c
                for c, node in self.defs.items()
                if any(isinstance(b, ast.Name) and b.id in found for b in node.bases)
            }
            if more <= found:
                break
            found |= more
        return found

    def _read_fields(self, name: str, depth: int) -> dict[str, ast.expr] | None:
        node = self.defs.get(name)
        if node is None or depth > 10:
            return None
        out: dict[str, ast.expr] = {}
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in self.defs:
                out.update(self.fields(base.id, depth + 1) or {})
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                if "ClassVar" in ast.unparse(stmt.annotation) or "InitVar" in ast.unparse(
                    stmt.annotation
                ):
                    continue
                out[stmt.target.id] = stmt.annotation
        return out

    def overrides(self, name: str, depth: int = 0) -> dict[str, str]:
        """Field -> arity its class's ``_customize_cli_kwargs`` sets (``del k["f"]["nargs"]``,
        ``k["f"]["action"] = "append"``), bases first."""
        node = self.defs.get(name)
        if node is None or depth > 10:
            return {}
        out: dict[str, str] = {}
        for base in node.bases:
            if isinstance(base, ast.Name):
                out.update(self.overrides(base.id, depth + 1))
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "_customize_cli_kwargs":
                for sub in ast.walk(stmt):
                    out.update(_override(sub))
        return out

    def is_class(self, name: str) -> bool:
        return name in self.defs


def keys_of(node: ast.expr) -> list[str]:
    """``k["f"]["nargs"]`` -> ["f", "nargs"] (constant string keys only)."""
    keys: list[str] = []
    while isinstance(node, ast.Subscript):
        if not (isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
            return []
        keys.insert(0, node.slice.value)
        node = node.value
    return keys if isinstance(node, ast.Name) else []


def action_name(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def field_arity(annotation: ast.expr, classes: Classes) -> str:
    """A dataclass field's arity as vLLM's ``get_kwargs`` makes it ("bool": --x/--no-x)."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = syntax.parse_expression(annotation.value).body
        except SyntaxError:
            return ""
    names = set(_type_names(annotation))
    if {"bool", "str", "None"} == names - {"Optional", "Union"}:
        return "?"
    if "bool" in names:
        return "bool"
    if "Literal" in names:
        return "1"
    if any(classes.is_class(n) for n in names):
        return "1"  # a config dataclass as JSON
    for collection in ("tuple", "Tuple", "list", "List", "set", "Set"):
        if collection in names:
            return _collection_arity(annotation)
    return "1"


def _type_names(node: ast.expr) -> Iterator[str]:
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, ast.Attribute):
        yield node.attr
    elif isinstance(node, ast.Constant) and node.value is None:
        yield "None"
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        yield from _type_names(node.left)
        yield from _type_names(node.right)
    elif isinstance(node, ast.Subscript):
        outer = list(_type_names(node.value))
        yield from outer
        if outer and outer[-1] in ("Optional", "Union", "Annotated"):
            inner = node.slice
            elts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            for elt in elts[:1] if outer[-1] == "Annotated" else elts:
                yield from _type_names(elt)


def _collection_arity(node: ast.expr) -> str:
    """``tuple[int, int]`` -> "2"; ``tuple[int, ...]``, lists and sets -> "+"."""
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Subscript)
            and isinstance(sub.value, ast.Name)
            and sub.value.id in ("tuple", "Tuple")
        ):
            elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
            if any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in elts):
                return "+"
            return str(len(elts))
    return "+"


def _override(node: ast.AST) -> dict[str, str]:
    """What one statement of ``_customize_cli_kwargs`` does to a field's arity."""
    if isinstance(node, ast.Delete):
        return {keys_of(t)[0]: "1" for t in node.targets if keys_of(t)[1:] == ["nargs"]}
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
        return {}
    keys = keys_of(node.targets[0])
    if len(keys) != 2:
        return {}
    if keys[1] == "nargs" and isinstance(node.value, ast.Constant):
        return {keys[0]: str(node.value.value)}
    if keys[1] == "action":  # a custom Action keeps the field's nargs
        action = action_name(node.value)
        if action in SWITCHES:
            return {keys[0]: "0"}
        if action in ("store", "append"):
            return {keys[0]: "1"}
    return {}
