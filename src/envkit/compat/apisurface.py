"""What vLLM's source uses of transformers, read from its text with ``ast``, never imported
(what transformers' source provides: modulefacts.py):

- :func:`imports_of` finds the names a vLLM file imports from transformers modules
  (``from transformers.x import Name``), leaving out imports that cannot fail at run time:
  those under ``if TYPE_CHECKING`` and those inside ``try`` with an ``except ImportError``;
  :func:`imports_in` gives the same from a file's text, parsing only its top-level blocks
  that hold such an import.
- :func:`attribute_reads` finds ``obj.name`` reads of chosen names, leaving out reads a
  ``try ... except AttributeError`` catches and reads of ``self.name`` in a class that defines
  ``name`` itself.
- :func:`class_body` and :func:`instance_attributes`: the names a class defines.
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import functools
import gc
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from envkit import syntax

IMPORTS_TRANSFORMERS = re.compile(
    rb"^[ \t]*(?:from[ \t]+transformers\b|import[ \t]+transformers\b)", re.M
)
# what a top-level block boundary needs told apart: comments and strings (a triple-quoted
# one may hold anything), and ``def``/``class`` at the start of a line after a blank one. A
# string that is never closed (not Python: its block then fails to parse) runs to the end of
# its line, or of the text for a triple-quoted one, so that no quote is tried again as the
# start of another string: one pass over any text, never a scan to the end from each quote.
_TOKENS = re.compile(
    rb"#[^\n]*"
    rb"|'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*(?:'''|\\?\Z)"
    rb'|"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*(?:"""|\\?\Z)'
    rb"|'[^'\\\n]*(?:\\.[^'\\\n]*)*(?:'|(?=\n)|\\?\Z)"
    rb'|"[^"\\\n]*(?:\\.[^"\\\n]*)*(?:"|(?=\n)|\\?\Z)'
    rb"|(?<=\n\n)(?:def|class|async[ \t]+def)\b",
    re.S,
)
_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=]", re.M)
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


_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter


@functools.cache
def steady_heap() -> None:
    """glibc's malloc gives a block over its mmap threshold (128 KiB) a mapping of its own,
    returned to the system when freed, but raises the threshold to the size of each such
    block freed (up to 32 MiB): once the first large range read is let go, every later text
    and block below its size comes from the heap, where what is freed stays resident. The
    threshold set once (to its default) stays put: some 10 MiB less at a check's peak. Does
    nothing off glibc."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes  # (only here: a check's own start-up cost)

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, 128 * 1024)


def parse(text: str | bytes, path: str) -> ast.Module | None:
    """The module's tree, or None when it is not Python this interpreter reads.

    The collector is paused while parsing: the trees are many small objects, and a
    collection pass per few thousand of them more than triples the time.
    """
    with collector_paused():
        try:
            return syntax.parse_module(text, path)
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


def imports_in(data: bytes, path: str) -> list[Use]:
    """``imports_of`` the file's tree, parsing only the top-level blocks that hold an import
    of transformers: the file is cut where a ``def`` or ``class`` starts a line after a blank
    one outside every string (a top-level statement starts there), and each block holding a
    match of :data:`IMPORTS_TRANSFORMERS` is parsed at its own lines. The whole file is parsed
    when a block does not parse, or its text is one the cut cannot follow (``\\r`` line ends,
    a NUL, an encoding declaration). (A file that is not Python as a whole but whose blocks
    holding the imports are gives those imports here, where its whole tree gives none.)"""
    if b"transformers" not in data:  # what every match holds, found far faster
        return []
    found = [m.start() for m in IMPORTS_TRANSFORMERS.finditer(data)]
    if not found:
        return []
    if b"\r" in data or b"\0" in data or _CODING.search(data, 0, _second_line_end(data)):
        return _whole(data, path)
    bounds = [0]
    for token in _TOKENS.finditer(data):
        if token.group()[:1] in b"cda":  # def, class, async def: a top-level statement
            bounds.append(token.start())
            if token.start() > found[-1]:
                break
    else:
        bounds.append(len(data))
    uses: list[Use] = []
    for block in sorted({bisect.bisect_right(bounds, at) - 1 for at in found}):
        start, end = bounds[block], bounds[block + 1]
        tree = parse(b"\n" * data.count(b"\n", 0, start) + data[start:end], path)
        if tree is None:
            return _whole(data, path)
        uses.extend(imports_of(tree, path))
    return uses


def _second_line_end(data: bytes) -> int:
    first = data.find(b"\n")
    second = data.find(b"\n", first + 1) if first >= 0 else -1
    return len(data) if second < 0 else second


def _whole(data: bytes, path: str) -> list[Use]:
    tree = parse(data, path)
    return imports_of(tree, path) if tree is not None else []


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
