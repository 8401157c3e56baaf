"""Python source parsed into trees, one parse at a time in a process.

envkit reads the source of the releases it judges with :mod:`ast`, often from several
threads at once (``history``, ``site`` and the bounds update scan releases side by side).
CPython 3.11's AST constructor keeps its recursion depth in state every thread shares, so two
parses at once can fail with ``SystemError: AST constructor recursion depth mismatch``
(CPython issue 106905): every parse goes through :func:`parse_module` or
:func:`parse_expression`, under one lock. Parsing holds the GIL throughout anyway, so the
threads lose no parallelism they had.

>>> parse_module("x = 1").body[0].targets[0].id
'x'
>>> parse_expression("list[int]").body.value.id
'list'
"""

from __future__ import annotations

import ast
import threading

_ONE_AT_A_TIME = threading.Lock()


def parse_module(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse`` of a module, while no other thread of this process parses."""
    with _ONE_AT_A_TIME:
        return ast.parse(source, filename=filename)


def parse_expression(source: str, filename: str = "<unknown>") -> ast.Expression:
    """``ast.parse(..., mode="eval")``, while no other thread of this process parses."""
    with _ONE_AT_A_TIME:
        return ast.parse(source, filename=filename, mode="eval")
