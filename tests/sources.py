"""envkit's own source, read, parsed and walked once per test process: the tests that read
the source by its syntax (the architecture's rules in ``test_layout``, the hints in
``cli/test_hints``, the environment variables in ``test_readme``) share the trees. They only
look: nothing here is changed by a test.

The trees are a million objects that live as long as the process: they are made with the
cyclic garbage collector paused (each of the full collections their making would set off
walks every object the worker holds: two thirds of the parse's CPU in a busy worker) and then
moved out of its reach (``gc.freeze``), so no later collection of the worker walks them
again either."""

from __future__ import annotations

import ast
import gc
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "envkit"


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block (reference counting still frees): for
    making many objects at once, as parsing does."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def parse(text: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse`` with the collector paused (the tree holds no cycle to collect)."""
    with collector_paused():
        return ast.parse(text, filename)


@cache
def files() -> tuple[Path, ...]:
    """Every module of the package, in path order."""
    return tuple(sorted(PACKAGE.rglob("*.py")))


@cache
def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@cache
def _trees() -> dict[Path, ast.Module]:
    """Every module's tree, parsed at once, and frozen out of the collector's walks."""
    with collector_paused():
        trees = {path: ast.parse(text(path), str(path)) for path in files()}
        gc.freeze()
    return trees


def tree(path: Path) -> ast.Module:
    return _trees()[path]


@cache
def nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of the module at ``path``, in ``ast.walk``'s order."""
    with collector_paused():
        return tuple(ast.walk(tree(path)))
