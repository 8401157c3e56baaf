"""The README's examples are true: every ```text block that starts with ``$ envkit ...`` is
run from the repository's root and must print exactly the lines shown (sizes and seconds
aside, which vary with the machine and the wheel's platform). Examples that read the package
index are ``network`` tests; the others run offline in the default suite."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from helpers import envkit

ROOT = Path(__file__).resolve().parent.parent
NEEDS_INDEX = {"compat", "scan", "history", "new-profile", "site", "lock"}
_VARIES = re.compile(r"[0-9]+(\.[0-9]+)? (MB|KB|B|s)\b")


def examples() -> list[tuple[str, list[str]]]:
    text = (ROOT / "README.md").read_text()
    found = []
    for block in re.findall(r"```text\n(.*?)```", text, flags=re.S):
        first, *rest = block.rstrip("\n").split("\n")
        if first.startswith("$ envkit "):
            found.append((first[len("$ envkit ") :], rest))
    return found


def _param(command: str, lines: list[str]) -> object:
    network = shlex.split(command)[0] in NEEDS_INDEX
    return pytest.param(command, lines, id=command, marks=[pytest.mark.network] if network else [])


def test_the_readme_has_examples_of_both_kinds() -> None:
    commands = [shlex.split(c)[0] for c, _ in examples()]
    assert "check-model" in commands and "compat" in commands


@pytest.mark.parametrize(("command", "expected"), [_param(c, e) for c, e in examples()])
def test_a_readme_example_prints_what_the_readme_shows(command: str, expected: list[str]) -> None:
    args = shlex.split(command)
    if args[0] == "compat":  # the README shows a first run; another test may have cached it
        args.append("--no-cache")
    ran = envkit(*args, cwd=ROOT)
    assert ran.code in (0, 1), ran.err
    got = ran.out.rstrip("\n").split("\n")
    assert [_VARIES.sub("N", line) for line in got] == [
        _VARIES.sub("N", line) for line in expected
    ], f"README.md's example of `envkit {command}` no longer matches its output"
