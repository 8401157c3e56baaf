"""envkit.syntax: one parse at a time in a process (CPython 3.11's AST constructor fails with
SystemError when two threads parse at once; tests/test_layout.py keeps every ast.parse
there)."""

from __future__ import annotations

import ast
import threading

from envkit import syntax


def test_a_parse_waits_while_another_thread_parses() -> None:
    parsed: list[ast.Module] = []
    with syntax._ONE_AT_A_TIME:  # as if another thread were parsing
        other = threading.Thread(target=lambda: parsed.append(syntax.parse_module("x = 1")))
        other.start()
        other.join(0.2)
        assert other.is_alive() and parsed == []  # it waits for the parse in progress
    other.join(10)
    assert len(parsed) == 1 and isinstance(parsed[0].body[0], ast.Assign)


def test_threads_parsing_side_by_side_all_get_their_trees() -> None:
    source = "def f(a, b):\n    return [a + b for _ in range(3)]\n" * 200
    trees: list[int] = []

    def many() -> None:
        for _ in range(20):
            trees.append(len(syntax.parse_module(source).body))

    threads = [threading.Thread(target=many) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert trees == [200] * 80
    assert isinstance(syntax.parse_expression("list[int]").body, ast.Subscript)
