"""Config fields vLLM checks that the target transformers' config classes rewrite.

vLLM's config loader checks what it reads from a config: a RoPE dict holding both the modern
key and the legacy one (``rope_type`` and ``type``) must give the same value, except for the
pairs it lists as renames (vLLM 0.13 on: legacy ``su`` read as ``longrope``, ``mrope`` as
``default``), or it raises ``ValueError``. transformers 5's config classes rewrite the modern
key for some values of the legacy one and keep the legacy key (Qwen2-VL: ``mrope`` becomes
``rope_type="default"``). A checkpoint giving the legacy key then fails to load with that
vLLM: a finding scoped to the model types of that config module, naming both places.

Both sides are read with ``ast``: vLLM's rule from ``if "A" in d and "B" in d:`` with the
comparison it raises on, the rewrite from ``self.x["A"] = "new"`` under a test of the rope
type against constants, in a block that leaves ``x["B"]`` as it was.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

CONFIG_MODULE = re.compile(r"transformers/models/[^/]+/configuration_[^/]+\.py")


@dataclass(frozen=True)
class KeyRule:
    """vLLM raises when ``d[modern] != d[legacy]``, but for the (legacy, modern) pairs allowed."""

    modern: str
    legacy: str
    allowed: frozenset[tuple[str, str]]
    file: str
    line: int  # the raise


@dataclass(frozen=True)
class Rewrite:
    """A transformers config sets ``d[modern] = new`` when the rope type is one of ``old``,
    keeping ``d[legacy]``."""

    modern: str
    legacy: str
    old: tuple[str, ...]
    new: str
    file: str
    line: int
    model_types: tuple[str, ...]


def vllm_rules(tree: ast.Module, path: str) -> list[KeyRule]:
    """The key rules of one vLLM file."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        keys = _both_present(node.test)
        if keys is None:
            continue
        first, second = keys
        local = _locals(node.body)
        for modern, legacy in ((first, second), (second, first)):
            found = _raise_on_difference(node.body, local, modern, legacy)
            if found is not None:
                allowed, line = found
                out.append(KeyRule(modern, legacy, allowed, path, line))
                break
    return out


def _both_present(test: ast.expr) -> tuple[str, str] | None:
    """``"a" in d and "b" in d`` -> ("a", "b")."""
    if not (
        isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and len(test.values) == 2
    ):
        return None
    keys = []
    for part in test.values:
        if not (
            isinstance(part, ast.Compare)
            and len(part.ops) == 1
            and isinstance(part.ops[0], ast.In)
            and isinstance(part.left, ast.Constant)
            and isinstance(part.left.value, str)
        ):
            return None
        keys.append(part.left.value)
    return keys[0], keys[1]


def _locals(body: Iterable[ast.stmt]) -> dict[str, str]:
    """``x = d["key"]`` in a block: x -> key."""
    out = {}
    for stmt in body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Subscript)
        ):
            key = _constant(stmt.value.slice)
            if key:
                out[stmt.targets[0].id] = key
    return out


def _raise_on_difference(
    body: list[ast.stmt], local: dict[str, str], modern: str, legacy: str
) -> tuple[frozenset[tuple[str, str]], int] | None:
    """The allowed pairs and the raise line of ``if <pairs>: pass elif a != b: raise``."""
    for stmt in body:
        allowed: set[tuple[str, str]] = set()
        branch: ast.stmt | None = stmt
        while isinstance(branch, ast.If):
            if _differ(branch.test, local, modern, legacy) and any(
                isinstance(s, ast.Raise) for s in branch.body
            ):
                line = next(s.lineno for s in branch.body if isinstance(s, ast.Raise))
                return frozenset(allowed), line
            if all(isinstance(s, ast.Pass) for s in branch.body):
                allowed.update(_pairs(branch.test, local, modern, legacy))
            branch = branch.orelse[0] if len(branch.orelse) == 1 else None
    return None


def _key_of(node: ast.expr, local: dict[str, str]) -> str:
    if isinstance(node, ast.Name):
        return local.get(node.id, "")
    if isinstance(node, ast.Subscript):
        return _constant(node.slice)
    return ""


def _differ(test: ast.expr, local: dict[str, str], modern: str, legacy: str) -> bool:
    if not (
        isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.NotEq)
    ):
        return False
    return {_key_of(test.left, local), _key_of(test.comparators[0], local)} == {modern, legacy}


def _pairs(
    test: ast.expr, local: dict[str, str], modern: str, legacy: str
) -> Iterator[tuple[str, str]]:
    """(legacy, modern) of ``(a == "x" and b == "y") or ...``."""
    options = (
        test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) else [test]
    )
    for option in options:
        parts = (
            option.values
            if isinstance(option, ast.BoolOp) and isinstance(option.op, ast.And)
            else [option]
        )
        values = {}
        for part in parts:
            if (
                isinstance(part, ast.Compare)
                and len(part.ops) == 1
                and isinstance(part.ops[0], ast.Eq)
            ):
                key, value = _key_of(part.left, local), _constant(part.comparators[0])
                if key and value:
                    values[key] = value
        if modern in values and legacy in values:
            yield values[legacy], values[modern]


def rewrites(tree: ast.Module, path: str, modern: str, legacy: str) -> list[Rewrite]:
    """Where a transformers config module sets ``x[modern]`` to a constant for some values of
    the rope type and keeps ``x[legacy]``."""
    types = tuple(
        sorted(
            {
                value
                for cls in tree.body
                if isinstance(cls, ast.ClassDef)
                for item in cls.body
                if isinstance(item, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "model_type" for t in item.targets)
                if (value := _constant(item.value))
            }
        )
    )
    out = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef):
            continue
        reads = _type_reads(function, modern, legacy)
        for node in ast.walk(function):
            if not isinstance(node, ast.If):
                continue
            old = _tested(node.test, reads, modern, legacy)
            if not old:
                continue
            for stmt in node.body:
                new = _sets(stmt, modern)
                if new and new not in old and not _touches(node.body, legacy):
                    out.append(Rewrite(modern, legacy, old, new, path, stmt.lineno, types))
    return out


def _type_reads(function: ast.FunctionDef, modern: str, legacy: str) -> set[str]:
    """Locals assigned from ``x.get(modern/legacy)`` (the rope type, read once)."""
    out = set()
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ) and _reads_type(node.value, set(), modern, legacy):
            out.add(node.targets[0].id)
    return out


def _reads_type(node: ast.expr, names: set[str], modern: str, legacy: str) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in names:
            return True
        if isinstance(sub, ast.Call) and _method_on(sub, "get") in (modern, legacy):
            return True
        if isinstance(sub, ast.Subscript) and _constant(sub.slice) in (modern, legacy):
            return True
    return False


def _tested(test: ast.expr, reads: set[str], modern: str, legacy: str) -> tuple[str, ...]:
    """The constants the rope type is compared to (``== "mrope"``, ``in ["su", "yarn"]``)."""
    found: list[str] = []
    for sub in ast.walk(test):
        if not (isinstance(sub, ast.Compare) and len(sub.ops) == 1):
            continue
        if not _reads_type(sub.left, reads, modern, legacy):
            continue
        right = sub.comparators[0]
        if isinstance(sub.ops[0], ast.Eq) and _constant(right):
            found.append(_constant(right))
        elif isinstance(sub.ops[0], ast.In) and isinstance(right, (ast.List, ast.Tuple, ast.Set)):
            found.extend(c for e in right.elts if (c := _constant(e)))
    return tuple(found)


def _sets(stmt: ast.stmt, key: str) -> str:
    """``self.x[key] = "value"`` -> value."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
        return ""
    target = stmt.targets[0]
    if isinstance(target, ast.Subscript) and _constant(target.slice) == key:
        return _constant(stmt.value)
    return ""


def _touches(body: list[ast.stmt], key: str) -> bool:
    """The block sets, deletes or pops ``x[key]``."""
    for stmt in body:
        for sub in ast.walk(stmt):
            if (
                isinstance(sub, ast.Subscript)
                and _constant(sub.slice) == key
                and not isinstance(sub.ctx, ast.Load)
            ):
                return True
            if isinstance(sub, ast.Call) and _method_on(sub, "pop") == key:
                return True
    return False


def _method_on(call: ast.Call, method: str) -> str:
    """The string first argument of ``x.method("key", ...)`` ('' for other calls)."""
    if getattr(call.func, "attr", "") != method or not call.args:
        return ""
    return _constant(call.args[0])


def _constant(node: ast.expr | None) -> str:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""


def conflicts(rule: KeyRule, found: Iterable[Rewrite]) -> list[tuple[Rewrite, tuple[str, ...]]]:
    """The rewrites vLLM refuses, each with the legacy values that make it fail."""
    out = []
    for rewrite in found:
        if (rewrite.modern, rewrite.legacy) != (rule.modern, rule.legacy):
            continue
        failing = tuple(v for v in rewrite.old if (v, rewrite.new) not in rule.allowed)
        if failing:
            out.append((rewrite, failing))
    return out
