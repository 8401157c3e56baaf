"""Python source read as data: module-level tables evaluated from the AST, never executed.

Registries in vLLM and transformers are plain dict literals with a little glue around them:
``{**A, **B}`` spreads, a dict comprehension filtering another table, ``OrderedDict([...])``,
``LazyConfigDict(key="Class")``, ``NAMES.update({...})`` and ``from .other import NAMES``.
:func:`module_tables` walks a module's top-level statements and evaluates exactly those
forms; anything else becomes :data:`OPAQUE` (a value we do not know), so an unexpected
construct is reported instead of guessed.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from typing import Any

from envkit import syntax


class _Opaque:
    def __repr__(self) -> str:
        return "<opaque>"


OPAQUE: Any = _Opaque()
_MAPPING_CALLS = {"dict", "OrderedDict", "LazyConfigDict"}
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


class SourceError(Exception):
    """The source is not Python we can parse."""


def module_tables(
    source: str, *, imports: Mapping[str, Mapping[str, Any]] | None = None, filename: str = ""
) -> dict[str, Any]:
    """Evaluate the module-level assignments of ``source`` that are data.

    ``imports`` maps a relative module name (``auto_mappings``) to the tables of that module,
    for ``from .auto_mappings import NAMES``.
    """
    try:
        return _module_tables(source, imports, filename)
    except (RecursionError, MemoryError):
        raise SourceError(
            f"{filename or 'source'} is nested too deeply (or too large) to read as data."
        ) from None


def _module_tables(
    source: str, imports: Mapping[str, Mapping[str, Any]] | None, filename: str
) -> dict[str, Any]:
    try:
        tree = syntax.parse_module(source, filename or "<source>")
    except (SyntaxError, ValueError) as exc:
        raise SourceError(f"{filename or 'source'} is not valid Python: {exc}") from None
    env: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and imports:
            table = imports.get((node.module or "").rpartition(".")[2], {})
            for alias in node.names:
                if alias.name in table:
                    env[alias.asname or alias.name] = table[alias.name]
        elif isinstance(node, ast.Assign):
            value = _eval(node.value, env)
            for target in node.targets:
                if isinstance(target, ast.Name):
                    env[target.id] = value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            if isinstance(node.target, ast.Name):
                env[node.target.id] = _eval(node.value, env)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            _update(node.value, env)
    return env


def _update(call: ast.Call, env: dict[str, Any]) -> None:
    """``NAME.update({...})`` on a table we know."""
    func = call.func
    if (
        isinstance(func, ast.Attribute)
        and func.attr == "update"
        and isinstance(func.value, ast.Name)
        and isinstance(env.get(func.value.id), dict)
    ):
        target = env[func.value.id]
        for arg in call.args:
            value = _eval(arg, env)
            if isinstance(value, dict):
                target.update(value)
            else:
                env[func.value.id] = OPAQUE
                return
        for keyword in call.keywords:
            if keyword.arg is not None:
                target[keyword.arg] = _eval(keyword.value, env)


def _eval(node: ast.AST, env: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id, OPAQUE)
    if isinstance(node, (ast.Tuple, ast.List)):
        return [_eval(e, env) for e in node.elts]
    if isinstance(node, ast.Dict):
        return _dict(node, env)
    if isinstance(node, ast.DictComp):
        return _dict_comp(node, env)
    if isinstance(node, ast.Call):
        return _call(node, env)
    if isinstance(node, ast.Subscript):  # table[0], table["key"]
        container, index = _eval(node.value, env), _eval(node.slice, env)
        try:
            return container[index] if isinstance(container, (list, dict)) else OPAQUE
        except (KeyError, IndexError, TypeError):
            return OPAQUE
    return OPAQUE


def _dict(node: ast.Dict, env: Mapping[str, Any]) -> Any:
    out: dict[Any, Any] = {}
    for key, value in zip(node.keys, node.values, strict=False):
        if key is None:  # **spread
            spread = _eval(value, env)
            if not isinstance(spread, dict):
                return OPAQUE
            out.update(spread)
            continue
        k = _eval(key, env)
        if k is OPAQUE:
            return OPAQUE
        out[k] = _eval(value, env)
    return out


def _call(node: ast.Call, env: Mapping[str, Any]) -> Any:
    func = node.func
    if isinstance(func, ast.Subscript):  # OrderedDict[str, str](...)
        func = func.value
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
    if name not in _MAPPING_CALLS:
        return OPAQUE
    out: dict[Any, Any] = {}
    for arg in node.args:
        value = _eval(arg, env)
        if isinstance(value, dict):
            out.update(value)
        elif isinstance(value, list) and all(isinstance(p, list) and len(p) == 2 for p in value):
            out.update((p[0], p[1]) for p in value)
        else:
            return OPAQUE
    for keyword in node.keywords:
        value = _eval(keyword.value, env)
        if keyword.arg is None:
            if not isinstance(value, dict):
                return OPAQUE
            out.update(value)
        else:
            out[keyword.arg] = value
    return out


def _dict_comp(node: ast.DictComp, env: Mapping[str, Any]) -> Any:
    if len(node.generators) != 1:
        return OPAQUE
    gen = node.generators[0]
    source = gen.iter
    if (
        isinstance(source, ast.Call)
        and isinstance(source.func, ast.Attribute)
        and source.func.attr == "items"
    ):
        table = _eval(source.func.value, env)
        items = list(table.items()) if isinstance(table, dict) else None
    else:
        seq = _eval(source, env)
        items = list(seq) if isinstance(seq, (list, dict)) else None
    if items is None:
        return OPAQUE
    out: dict[Any, Any] = {}
    for item in items:
        scope = dict(env)
        if not _bind(gen.target, list(item) if isinstance(item, tuple) else item, scope):
            return OPAQUE
        verdicts = [_truth(cond, scope) for cond in gen.ifs]
        if any(v is None for v in verdicts):
            return OPAQUE
        if all(verdicts):
            key = _eval(node.key, scope)
            if key is OPAQUE:
                return OPAQUE
            out[key] = _eval(node.value, scope)
    return out


def _bind(target: ast.AST, value: Any, scope: dict[str, Any]) -> bool:
    if isinstance(target, ast.Name):
        scope[target.id] = value
        return True
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, list):
        if len(target.elts) != len(value):
            return False
        return all(_bind(t, v, scope) for t, v in zip(target.elts, value, strict=False))
    return False


def _truth(node: ast.AST, scope: Mapping[str, Any]) -> bool | None:
    """The truth of a simple condition, or None when it cannot be known from the data."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = _eval(node.left, scope), _eval(node.comparators[0], scope)
        compare = _COMPARE.get(type(node.ops[0]))
        if compare is None or OPAQUE in (left, right):
            return None
        return bool(compare(left, right))
    if isinstance(node, ast.BoolOp):
        values = [_truth(v, scope) for v in node.values]
        if any(v is None for v in values):
            return None
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _truth(node.operand, scope)
        return None if inner is None else not inner
    return None
