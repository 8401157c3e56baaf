"""Whose attribute a read of ``x.name`` is, when vLLM defines ``name`` too.

An attribute check matches reads by name. When vLLM's own source also defines the name (a
method, a property, ``self.name = ...``), ``x.name`` may well be vLLM's object
(``self._connector.fetch_audio(url)`` is vLLM's media connector, not transformers' feature
extractor). Such a read counts only when its receiver is typed as transformers': a
parameter annotated with a class imported from transformers, or with a vLLM alias built
from one (``AnyTokenizer = Union[PreTrainedTokenizer, ...]``, in the file or imported from
another vLLM module). Any other read of a shared name is undecided, never a finding.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Mapping


def defined_by_vllm(texts: Mapping[str, bytes], names: Iterable[str]) -> set[str]:
    """The names some vLLM file defines: ``def name``, ``name = ...`` or ``self.name = ...``."""
    wanted = sorted(set(names))
    if not wanted:
        return set()
    alternatives = b"|".join(re.escape(n.encode()) for n in wanted)
    pattern = re.compile(
        rb"^[ \t]*(?:async[ \t]+)?def[ \t]+(" + alternatives + rb")\b"
        rb"|^[ \t]+(" + alternatives + rb")[ \t]*(?::[^=\n]*)?=[^=]"
        rb"|\bself\.(" + alternatives + rb")[ \t]*(?::[^=\n]*)?=[^=]",
        re.M,
    )
    found: set[str] = set()
    needles = [n.encode() for n in wanted]
    for data in texts.values():
        if not any(n in data for n in needles):
            continue
        for match in pattern.finditer(data):
            found.add(next(g for g in match.groups() if g).decode())
    return found


def transformers_types(tree: ast.Module, imported: Callable[[str, str], bool]) -> set[str]:
    """The names that stand for transformers types in a file: classes imported from
    transformers, names ``imported(module, name)`` says are such in another vLLM module,
    and module-level aliases built from either."""
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            top = node.module.split(".")[0]
            for alias in node.names:
                local = alias.asname or alias.name
                if (top == "transformers" and alias.name[:1].isupper()) or (
                    top == "vllm" and imported(node.module, alias.name)
                ):
                    out.add(local)
    for node in tree.body:  # aliases, in order: a later one may build on an earlier one
        target = (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        )
        if isinstance(node, ast.AnnAssign):
            target = node.target
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and value is not None and _mentions(value, out):
            out.add(target.id)
    return out


def typed_reads(tree: ast.Module, names: set[str], types: set[str]) -> set[tuple[str, int]]:
    """(name, line) of the reads ``p.name`` whose receiver ``p`` is a parameter annotated
    with one of ``types``."""
    out: set[tuple[str, int]] = set()
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        arguments = [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]
        typed = {
            a.arg for a in arguments if a.annotation is not None and _mentions(a.annotation, types)
        }
        if not typed:
            continue
        for node in ast.walk(function):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in names
                and isinstance(node.value, ast.Name)
                and node.value.id in typed
            ):
                out.add((node.attr, node.lineno))
    return out


def _mentions(node: ast.expr, types: set[str]) -> bool:
    """The annotation or alias names one of ``types`` (string annotations included)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in types:
            return True
        if isinstance(sub, ast.Attribute) and sub.attr in types:
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            words = set(re.findall(r"[A-Za-z_]\w*", sub.value))
            if words & types:
                return True
    return False
