"""RoPE dicts nested by layer type, which older vLLM config loaders refuse.

vLLM's config loader (``patch_rope_scaling_dict`` and its successors) raises when the RoPE
dict it is handed lacks ``rope_type`` (``if "rope_type" not in d: raise ValueError``).
transformers 5's config classes for models mixing sliding and full attention (Gemma 3,
ModernBERT...) write one RoPE dict per layer type, ``{"sliding_attention": {"rope_type":
...}, "full_attention": {...}}``: the outer dict has no ``rope_type``. A vLLM that checks
each layer type's dict (the check called inside a loop over the dict's values) loads such
configs; one that hands the dict over whole refuses every config of those model types.

Both sides are read with ``ast``: vLLM's check from its config module, the nesting from a
dict literal in a config module whose values are dicts carrying the key.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class RequiredKey:
    """vLLM raises when a RoPE dict lacks ``key`` (at ``file:line``), and never checks the
    values of a nested dict one by one."""

    key: str
    function: str
    file: str
    line: int  # the raise


@dataclass(frozen=True)
class Nested:
    """A transformers config module writing a RoPE dict nested by layer type."""

    key: str
    layer_types: tuple[str, ...]
    file: str
    line: int
    model_types: tuple[str, ...]


def required_keys(tree: ast.Module, path: str) -> list[RequiredKey]:
    """The keys vLLM's functions require of the dict they are given (``if "k" not in d:
    raise``), when no call of that function checks a dict's values one by one."""
    found = []
    for function in tree.body:
        if not isinstance(function, ast.FunctionDef) or not function.args.args:
            continue
        param = function.args.args[0].arg
        for node in ast.walk(function):
            key = _missing_key(node, param)
            if key and isinstance(node, ast.If) and not _checks_values(tree, function.name):
                raise_line = next(s.lineno for s in node.body if isinstance(s, ast.Raise))
                found.append(RequiredKey(key, function.name, path, raise_line))
    return found


def _missing_key(node: ast.AST, param: str) -> str:
    """``if "key" not in param: raise ...`` -> key."""
    if not isinstance(node, ast.If) or not any(isinstance(s, ast.Raise) for s in node.body):
        return ""
    test = node.test
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.NotIn)
        and isinstance(test.left, ast.Constant)
        and isinstance(test.left.value, str)
        and isinstance(test.comparators[0], ast.Name)
        and test.comparators[0].id == param
    ):
        return ""
    return test.left.value


def _checks_values(tree: ast.Module, function: str) -> bool:
    """Some call of ``function`` sits in a loop over a dict's ``.values()``."""
    for loop in ast.walk(tree):
        if not isinstance(loop, ast.For):
            continue
        over = loop.iter
        if not (isinstance(over, ast.Call) and getattr(over.func, "attr", "") == "values"):
            continue
        for node in ast.walk(loop):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == function
            ):
                return True
    return False


def nested_dicts(tree: ast.Module, path: str, key: str) -> list[Nested]:
    """Dict literals of a config module keyed by layer type whose every value is a dict
    giving ``key`` (and which has no ``key`` of its own)."""
    types = tuple(
        sorted(
            {
                item.value.value
                for cls in tree.body
                if isinstance(cls, ast.ClassDef)
                for item in cls.body
                if isinstance(item, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "model_type" for t in item.targets)
                and isinstance(item.value, ast.Constant)
                and isinstance(item.value.value, str)
            }
        )
    )
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Dict) or not node.keys:
            continue
        keys = [_text(k) for k in node.keys]
        if all(keys) and key not in keys and all(_gives(v, key) for v in node.values):
            out.append(Nested(key, tuple(keys), path, node.lineno, types))
    return out


def _gives(node: ast.expr, key: str) -> bool:
    return isinstance(node, ast.Dict) and any(_text(k) == key for k in node.keys)


def _text(node: ast.expr | None) -> str:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""
