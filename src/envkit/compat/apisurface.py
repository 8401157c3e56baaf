"""What vLLM's source uses of transformers, read from its text with ``ast``, never imported
(what transformers' source provides: modulefacts.py):

- :func:`imports_of` finds the names a vLLM file imports from transformers modules
  (``from transformers.x import Name``), leaving out imports that cannot fail at run time:
  those under ``if TYPE_CHECKING`` and those inside ``try`` with an ``except ImportError``.
- :func:`attribute_reads` finds ``obj.name`` reads of chosen names, leaving out reads a
  ``try ... except AttributeError`` catches and reads of ``self.name`` in a class that defines
  ``name`` itself.
- :func:`class_body` and :func:`instance_attributes`: the names a class defines.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

IMPORTS_TRANSFORMERS = re.compile(
    rb"^[ \t]*(?:from[ \t]+transformers\b|import[ \t]+transformers\b)", re.M
)
_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
_ATTRIBUTE_ERRORS = {"AttributeError", "Exception", "BaseException"}


@dataclass(frozen=True)
class Use:
    """One place vLLM uses a transformers name: ``module.name`` at ``file:line``."""

    module: str  # transformers.tokenization_utils_base
    name: str  # '' for ``import transformers.x``
    file: str
    line: int


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused (as it was again after): the trees are
    millions of small objects without cycles, freed by their reference counts, and every
    full collection pass walks all those still held (a third of a compat check's time)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def parse(text: str | bytes, path: str) -> ast.Module | None:
    """The module's tree, or None when it is not Python this interpreter reads.

    The collector is paused while parsing: the trees are many small objects, and a
    collection pass per few thousand of them more than triples the time.
    """
    with collector_paused():
        try:
            return ast.parse(text, filename=path)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None


def _handler_names(handler: ast.ExceptHandler) -> set[str]:
    if handler.type is None:
        return {"BaseException"}
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return {k.id if isinstance(k, ast.Name) else getattr(k, "attr", "") for k in kinds}


def _catches(node: ast.Try, errors: set[str]) -> bool:
    return any(_handler_names(h) & errors for h in node.handlers)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


_BODIES = ("body", "orelse", "finalbody", "handlers")


def _statements(body: Iterable[ast.AST], *, skip_guarded: bool = False) -> Iterator[ast.AST]:
    """Statements in ``body`` and in the blocks nested in them (functions and classes
    included); expressions are not entered. With ``skip_guarded``, the bodies of ``try``
    blocks that catch ImportError and of ``if TYPE_CHECKING`` are left out."""
    stack = list(reversed(list(body)))
    while stack:
        node = stack.pop()
        yield node
        inner: list[ast.AST] = []
        if skip_guarded and isinstance(node, ast.Try) and _catches(node, _IMPORT_ERRORS):
            inner = [*node.handlers, *node.orelse, *node.finalbody]
        elif skip_guarded and isinstance(node, ast.If) and _is_type_checking(node.test):
            inner = list(node.orelse)
        else:
            for name in _BODIES:
                inner.extend(getattr(node, name, ()) or ())
            if isinstance(node, ast.Match):
                for case in node.cases:
                    inner.extend(case.body)
        stack.extend(reversed(inner))


def imports_of(tree: ast.Module, path: str) -> list[Use]:
    """The transformers names ``tree`` imports where a failure would surface."""
    uses: list[Use] = []
    for node in _statements(tree.body, skip_guarded=True):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "transformers" or node.module.startswith("transformers."):
                uses.extend(
                    Use(node.module, a.name, path, node.lineno) for a in node.names if a.name != "*"
                )
        elif isinstance(node, ast.Import):
            uses.extend(
                Use(a.name, "", path, node.lineno)
                for a in node.names
                if a.name.startswith("transformers.")
            )
    return uses


def attribute_reads(tree: ast.Module, path: str, names: set[str]) -> list[tuple[str, str, int]]:
    """``(name, path, line)`` of each read of ``x.name`` for ``name`` in ``names``, except
    those a ``try ... except AttributeError`` catches and ``self.name`` in a class that
    defines ``name``."""
    guarded: list[tuple[int, int]] = []
    classes: list[ast.ClassDef] = []
    found: list[ast.Attribute] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr in names and isinstance(node.ctx, ast.Load):
                found.append(node)
        elif isinstance(node, ast.Try) and node.body and _catches(node, _ATTRIBUTE_ERRORS):
            guarded.append((node.body[0].lineno, node.body[-1].end_lineno or node.lineno))
        elif isinstance(node, ast.ClassDef):
            classes.append(node)
    reads = []
    for node in found:
        line = node.lineno
        if any(a <= line <= b for a, b in guarded):
            continue
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            around = [c for c in classes if c.lineno <= line <= (c.end_lineno or c.lineno)]
            if around and node.attr in class_members(around[-1]):
                continue
        reads.append((node.attr, path, line))
    return reads


def class_members(node: ast.ClassDef) -> set[str]:
    """Names a class defines: methods, class attributes and ``self.x = ...`` in its methods."""
    return class_body(node) | instance_attributes(node)


def class_body(node: ast.ClassDef) -> set[str]:
    """Names the class body defines: methods, properties, nested classes, class attributes."""
    out: set[str] = set()
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(item.name)
        elif isinstance(item, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = item.targets if isinstance(item, ast.Assign) else [item.target]
            out.update(target_names(targets))
    return out


def instance_attributes(node: ast.ClassDef) -> set[str]:
    """Names the class's methods assign on ``self``."""
    out: set[str] = set()
    methods = [i for i in node.body if isinstance(i, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for stmt in _statements([s for m in methods for s in m.body]):
        if isinstance(stmt, ast.Assign):
            targets: list[ast.expr] = list(stmt.targets)
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
            targets = [stmt.target]
        else:
            continue
        for target in targets:
            for sub in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
                if (
                    isinstance(sub, ast.Attribute)
                    and isinstance(sub.value, ast.Name)
                    and sub.value.id == "self"
                ):
                    out.add(sub.attr)
    return out


def target_names(targets: Iterable[ast.expr]) -> set[str]:
    out: set[str] = set()
    for target in targets:
        if isinstance(target, ast.Name):
            out.add(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            out.update(target_names(target.elts))
    return out
