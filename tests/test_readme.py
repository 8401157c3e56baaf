"""The README's examples are true: every ```text block that starts with ``$ envkit ...`` is
run from the repository's root and must print exactly the lines shown (sizes and seconds
aside, which vary with the machine and the wheel's platform). Examples that read the package
index are ``network`` tests; the others run offline in the default suite."""

from __future__ import annotations

import ast
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


def _test_functions(pattern: str) -> tuple[int, int]:
    files = sorted((ROOT / "tests").rglob(pattern))
    found = sum(
        1
        for path in files
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
    )
    return found, len(files)


def _shipped_cells() -> tuple[int]:
    from envkit.lock.cells import cells
    from envkit.profiles.catalog import Catalog

    listing = Catalog.from_option(str(ROOT / "envs")).list()
    return (sum(len(cells(p)) for p in listing.profiles),)


# each count the README states, and how the repository counts it
COUNTS = {
    r"([0-9]+) test functions in ([0-9]+) files": lambda: _test_functions("test_*.py"),
    r"([0-9]+) test functions\s+in the ([0-9]+) `tests/\*\*/test_network_\*\.py` files": lambda: (
        _test_functions("test_network_*.py")
    ),
    r"([0-9]+) cells, all current": _shipped_cells,
}


@pytest.mark.parametrize("pattern", list(COUNTS))
def test_the_readmes_counts_are_the_repositorys(pattern: str) -> None:
    text = (ROOT / "README.md").read_text()
    found = re.findall(pattern, text)
    assert found, f"README.md no longer states {pattern!r}"
    for match in found:
        said = tuple(int(n) for n in (match if isinstance(match, tuple) else (match,)))
        assert said == COUNTS[pattern](), f"README.md says {match!r} for {pattern!r}"


_TIMING = re.compile(r"\b[0-9]+(\.[0-9]+)?(-[0-9.]+)? (s|min)\b")
_NOT_A_MEASUREMENT = re.compile(r"default [0-9]+ s\b|[0-9]+ s\)?, redirects")  # settings


def test_every_timing_in_the_readme_is_a_measurement_with_its_benchmark() -> None:
    """Outside the examples (their output's seconds vary and are not compared), a paragraph
    that gives a time names where it was measured and how to measure it again: the
    Benchmarks section (which names the machine, the conditions and the script)."""
    text = re.sub(r"```.*?```", "", (ROOT / "README.md").read_text(), flags=re.S)
    benchmarks = text.index("## Benchmarks")
    bare = []
    for start, paragraph in _paragraphs(text):
        prose = re.sub(r"`[^`]*`", "", paragraph)  # inline code: commands, sample lines
        timed = _TIMING.search(_NOT_A_MEASUREMENT.sub("", prose))
        if timed and not start >= benchmarks and "Benchmarks" not in paragraph:
            bare.append(paragraph.strip()[:120])
    assert bare == [], "timings without their machine and benchmark:\n" + "\n".join(bare)
    section = text[benchmarks : text.index("## Dependencies")]
    # the timings table: the section's first table (later ones are results, not timings)
    first = section[section.index("\n| ") :].split("\n\n", 1)[0]
    rows = [line for line in first.splitlines() if line.startswith("| ") and "---" not in line]
    for row in rows[1:]:
        assert "benchmarks/" in row or "| the same" in row, row
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        if script.name != "machine.py":
            assert f"benchmarks/{script.name}" in section, script.name


def _paragraphs(text: str) -> list[tuple[int, str]]:
    out, position = [], 0
    for block in re.split(r"(\n\s*\n)", text):
        if block.strip():
            out.append((position, block))
        position += len(block)
    return out


_ENV_CALLS = {"get", "getenv", "pop", "seconds_from_env", "seconds_setting"}


def environment_variables_read() -> set[str]:
    """Every environment variable envkit's source reads by name: ``os.environ.get("X")``,
    ``os.environ["X"]``, ``os.getenv("X")``, the seconds settings, click's ``envvar="X"``."""
    names: set[str] = set()
    for path in (ROOT / "src" / "envkit").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                literals = [node.args[0]] if called in _ENV_CALLS and node.args else []
                literals += [k.value for k in node.keywords if k.arg == "envvar"]
                names |= {
                    a.value
                    for a in literals
                    if isinstance(a, ast.Constant) and isinstance(a.value, str)
                }
            elif isinstance(node, ast.Subscript) and "environ" in ast.unparse(node.value):
                if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                    names.add(node.slice.value)
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and re.fullmatch(r"ENVKIT_[A-Z0-9_]+", node.value)  # envkit's own, by any path
            ):
                names.add(node.value)
    return {n for n in names if re.fullmatch(r"[A-Z][A-Z0-9_]+", n)}


def test_every_environment_variable_envkit_reads_is_on_one_readme_page() -> None:
    text = (ROOT / "README.md").read_text()
    page = text.split("### Environment variables", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)`", page, flags=re.M))
    read = environment_variables_read()
    assert read, "the scan found no variable: it no longer sees how envkit reads them"
    assert sorted(read - listed) == [], "read by envkit but missing from the README's page"
    assert sorted(listed - read - _READ_BY_THE_LIBRARIES) == [], "listed but never read"


# read for envkit by the libraries it hands the work to (huggingface_hub, click, uv), or
# passed through to vLLM, and said on the page for that reason
_READ_BY_THE_LIBRARIES = {"HF_TOKEN", "HF_HUB_OFFLINE", "COLUMNS"}
