"""envkit's own source, read, parsed and walked once per test process: the tests that read
the source by its syntax (the architecture's rules in ``test_layout``, the hints in
``cli/test_hints``, the environment variables in ``test_readme``) share the trees. They only
look: nothing here is changed by a test."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "envkit"


@cache
def files() -> tuple[Path, ...]:
    """Every module of the package, in path order."""
    return tuple(sorted(PACKAGE.rglob("*.py")))


@cache
def text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


@cache
def tree(path: Path) -> ast.Module:
    return ast.parse(text(path), str(path))


@cache
def nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of the module at ``path``, in ``ast.walk``'s order."""
    return tuple(ast.walk(tree(path)))
