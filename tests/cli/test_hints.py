"""Every hint envkit prints that names an envkit command names only options that command
has (field report 2's user was told to give `verify` a `--gpu-memory` it does not take).

The walk reads every string literal in the source (f-strings with their fixed parts), finds
each ``envkit COMMAND ...`` in it and checks each ``--option`` up to the end of that clause
against the command's real click options (the group's own options are taken after any
command: ``cli.group.add_group_options``)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from functools import cache

import click
import sources

import envkit.cli  # noqa: F401  (registers every command on the group)
from envkit.cli.group import COMMAND_MODULES, cli, load

# a clause ends where another sentence or command may start
_CLAUSE = re.compile(r"envkit ([a-z][a-z-]*)([^;()`\n]*?)(?=[;()`\n]|, | or | and |\. |: |$)")
_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")


def _options(command: click.Command) -> set[str]:
    """A command's options; a group's, those of its subcommands too (``knowledge export``)."""
    subs = command.commands.values() if isinstance(command, click.Group) else ()
    own = {opt for p in command.params for opt in (*p.opts, *p.secondary_opts)}
    return own.union(*(_options(sub) for sub in subs))


def commands() -> dict[str, set[str]]:
    group = _options(cli)
    return {name: _options(cmd) | group for name, cmd in ((n, load(n)) for n in COMMAND_MODULES)}


def _texts(walked: Iterable[ast.AST]) -> list[tuple[int, str]]:
    """The string literals among a module's nodes (``ast.walk``'s), f-strings joined."""
    out: list[tuple[int, str]] = []
    joined: set[int] = set()
    constants: list[ast.Constant] = []
    for node in walked:
        if isinstance(node, ast.JoinedStr):
            parts = [v.value if isinstance(v, ast.Constant) else "{}" for v in node.values]
            out.append((node.lineno, "".join(str(p) for p in parts)))
            joined.update(id(v) for v in node.values)
        elif isinstance(node, ast.Constant):
            constants.append(node)
    plain = [n for n in constants if id(n) not in joined]
    out += [(n.lineno, n.value) for n in plain if isinstance(n.value, str)]
    return out


@cache  # the source is read and walked once, for every test here
def hints() -> list[tuple[str, str, str, list[str]]]:
    """(where, command, clause, options) for every ``envkit COMMAND`` clause in the source."""
    found = []
    for path in sources.files():
        for line, text in _texts(sources.nodes(path)):
            for match in _CLAUSE.finditer(text):
                options = _OPTION.findall(match.group(2))
                where = f"{path.relative_to(sources.PACKAGE)}:{line}"
                found.append((where, match.group(1), match.group(0), options))
    return found


def test_the_walk_finds_the_hints() -> None:
    found = hints()
    # the hints of plan, verify, new-profile and build are among them, options and all
    named = {(cmd, opt) for _w, cmd, _c, opts in found for opt in opts}
    assert {
        ("verify", "--compute-capability"),
        ("new-profile", "--for-model"),
        ("build", "--venv"),
    } <= named
    assert len(found) > 40


def test_every_hint_names_only_options_its_command_has() -> None:
    known = commands()
    wrong = [
        f"{where}: {clause!r}: {opt}"
        for where, cmd, clause, opts in hints()
        if cmd in known
        for opt in opts
        if opt not in known[cmd]
    ]
    assert not wrong, "\n".join(wrong)


def test_the_walk_catches_a_wrong_hint() -> None:
    tree = ast.parse('x = f"run envkit verify {p} --gpu-memory 8GiB"')
    ((_line, text),) = _texts(ast.walk(tree))
    match = _CLAUSE.search(text)
    assert match and match.group(1) == "verify"
    assert _OPTION.findall(match.group(2)) == ["--gpu-memory"]
    assert "--gpu-memory" not in commands()["verify"]
