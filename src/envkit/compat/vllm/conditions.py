"""What a condition in vLLM's source evaluates to for one transformers release.

Three-valued: True, False, or None when it cannot be told. A name stands for the installed
version (``transformers.__version__``, ``importlib.metadata.version("transformers")``,
``from transformers import __version__ as V``), a version literal, a string or a set of
strings, a flag computed from those (here, or imported from another vLLM module), a
transformers module or class (for ``hasattr`` probes) or a ``find_spec`` answer. A probe of
an attribute the release lacks (``hasattr(config, "name")``, ``getattr(config, "name",
False)``) on any receiver is False when the release's classes surely lack it (the
reference's had it, none of the release's defines it and vLLM defines no such name: the
same evidence a removed-attribute finding rests on). guards.py walks the statements with it.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from packaging.version import InvalidVersion, Version


class Probe(Protocol):
    """What the guards ask of the target transformers release (None: cannot be told)."""

    version: Version

    def module_exists(self, module: str) -> bool | None: ...

    def provides(self, module: str, name: str) -> bool | None: ...

    def has_member(self, module: str, cls: str, name: str) -> bool | None: ...

    def lacks(self, name: str) -> bool:
        """The release's classes surely lack attribute ``name`` (see the module's docstring)."""
        ...


class _Installed:
    """The installed transformers version, as vLLM's source refers to it."""


INSTALLED = _Installed()
Value = object  # INSTALLED, a Version, a str, a bool, ("module", m), ("class", m, n) or None
COMPARE: dict[type[ast.cmpop], Callable[[Version, Version], bool]] = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
VERSION_CALLS = {"Version", "parse", "parse_version"}
Flags = Callable[[str], Mapping[str, Value]]


class Conditions:
    """The names of one parsed vLLM file and the conditions over them."""

    def __init__(self, tree: ast.Module, probe: Probe, flags: Flags = lambda _m: {}) -> None:
        self.tree, self.probe, self.flags = tree, probe, flags
        self.env: dict[str, Value] = {}
        self.classes: list[ast.ClassDef] = []  # in line order (for ``self`` probes)

    def module_values(self) -> dict[str, Value]:
        """The module-level names whose value is known (flags, versions, imports)."""
        self._bind_module(self.tree.body)
        return dict(self.env)

    def _bind_module(self, body: Iterable[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                self._bind_import(node)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "transformers":
                        self.env[alias.asname or "transformers"] = ("module", alias.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                self._assign(node, self.env)
            elif isinstance(node, (ast.If, ast.Try)):
                self._bind_module([*node.body, *node.orelse])

    def _bind_import(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        top = module.split(".")[0]
        for alias in node.names:
            name = alias.asname or alias.name
            if top == "transformers":
                if alias.name == "__version__":
                    self.env[name] = INSTALLED
                elif alias.name[:1].isupper():
                    self.env[name] = ("class", module, alias.name)
                else:
                    self.env[name] = ("name", module, alias.name)
            elif top == "vllm":
                value = self.flags(module).get(alias.name)
                if value is not None:
                    self.env[name] = value

    def _assign(self, node: ast.Assign | ast.AnnAssign, env: dict[str, Value]) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if node.value is None or len(targets) != 1 or not isinstance(targets[0], ast.Name):
            return
        value = self.value(node.value, env)
        if value is None:
            env.pop(targets[0].id, None)
        else:
            env[targets[0].id] = value

    def value(self, node: ast.expr, env: Mapping[str, Value]) -> Value:
        """What an expression stands for, or None."""
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bool)):
            return node.value
        if isinstance(node, (ast.Set, ast.List, ast.Tuple)):
            items = [self.value(e, env) for e in node.elts]
            return frozenset(items) if all(isinstance(i, str) for i in items) else None
        if isinstance(node, ast.Name):
            return env.get(node.id)
        if isinstance(node, ast.Attribute):
            owner = self.value(node.value, env)
            if node.attr == "__version__" and isinstance(owner, tuple) and owner[0] == "module":
                return INSTALLED
            return None
        if isinstance(node, ast.Call):
            return self._call(node, env)
        if isinstance(node, ast.Compare):
            return self._compare(node, env)
        if isinstance(node, ast.BoolOp):
            return bool_op(isinstance(node.op, ast.And), [self.truth(v, env) for v in node.values])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self.truth(node.operand, env)
            return None if inner is None else not inner
        return None

    def truth(self, node: ast.expr, env: Mapping[str, Value]) -> bool | None:
        value = self.value(node, env)
        return value if isinstance(value, bool) else None

    def _call(self, node: ast.Call, env: Mapping[str, Value]) -> Value:
        called = called_name(node)
        first = node.args[0] if node.args else None
        literal = first.value if isinstance(first, ast.Constant) else None
        if called in VERSION_CALLS and first is not None:
            inner = self.value(first, env)
            if inner is INSTALLED:
                return INSTALLED
            if isinstance(inner, str):
                try:
                    return Version(inner)
                except InvalidVersion:
                    return None
            return None
        if called == "version" and literal == "transformers":
            return INSTALLED  # importlib.metadata.version("transformers")
        if called == "find_spec" and isinstance(literal, str):
            if literal.split(".")[0] == "transformers":
                return ("spec", literal)
            return None
        if called == "hasattr" and len(node.args) == 2 and first is not None:
            second = node.args[1]
            if isinstance(second, ast.Constant) and isinstance(second.value, str):
                found = self._hasattr(first, second.value, env)
                return False if found is None and self.probe.lacks(second.value) else found
        if called == "getattr" and len(node.args) == 3 and isinstance(node.func, ast.Name):
            name, default = node.args[1], node.args[2]
            falsy = isinstance(default, ast.Constant) and not default.value
            if falsy and isinstance(name, ast.Constant) and isinstance(name.value, str):
                # the default is what it answers: its truth is all a condition asks
                return False if self.probe.lacks(name.value) else None
        return None

    def _hasattr(self, owner: ast.expr, name: str, env: Mapping[str, Value]) -> bool | None:
        if isinstance(owner, ast.Name) and owner.id == "self":
            return self._self_has(owner, name, env)
        value = self.value(owner, env)
        if isinstance(value, tuple) and value[0] == "module":
            return self.probe.provides(str(value[1]), name)
        if isinstance(value, tuple) and value[0] == "class":
            return self.probe.has_member(str(value[1]), str(value[2]), name)
        return None

    def _self_has(self, node: ast.expr, name: str, env: Mapping[str, Value]) -> bool | None:
        around = [c for c in self.classes if c.lineno <= node.lineno <= (c.end_lineno or c.lineno)]
        if not around:
            return None
        cls = around[-1]
        if any(
            isinstance(i, (ast.FunctionDef, ast.AsyncFunctionDef)) and i.name == name
            for i in cls.body
        ):
            return True
        answers = []
        for base in cls.bases:
            value = self.value(base, env)
            if not (isinstance(value, tuple) and value[0] == "class"):
                return None  # a base of vLLM's own or unknown: cannot be told
            answers.append(self.probe.has_member(str(value[1]), str(value[2]), name))
        return bool_op(False, answers) if answers else None

    def _compare(self, node: ast.Compare, env: Mapping[str, Value]) -> Value:
        if len(node.ops) != 1:
            return None
        left, right = self.value(node.left, env), self.value(node.comparators[0], env)
        op = node.ops[0]
        if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(left, tuple) and left[0] == "spec":
            is_none = (
                isinstance(node.comparators[0], ast.Constant) and node.comparators[0].value is None
            )
            found = self.probe.module_exists(str(left[1]))
            if found is None or not is_none:
                return None
            return (not found) if isinstance(op, ast.Is) else found
        compare = COMPARE.get(type(op))
        if compare is None:
            return None
        if left is INSTALLED and isinstance(right, Version):
            return compare(self.probe.version, right)
        if right is INSTALLED and isinstance(left, Version):
            return compare(left, self.probe.version)
        return None

    # -- helpers that raise below a version


def bool_op(conjunction: bool, values: list[bool | None]) -> bool | None:
    if conjunction:
        return False if False in values else (None if None in values else True)
    return True if True in values else (None if None in values else False)


def called_name(call: ast.Call) -> str:
    return call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")
