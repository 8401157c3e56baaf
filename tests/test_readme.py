"""The documentation is true: the README and every page under ``docs/``. Every ```text block
that starts with ``$ envkit ...`` is run from the repository's root and must print exactly the
lines shown (sizes and seconds aside, which vary with the machine and the wheel's platform);
examples that read the package index are ``network`` tests, the others run offline in the
default suite. The counts and timings the pages state are the repository's, every option a page
shows is its command's, every relative link leads to a file and heading that exist, and every
command has its page under ``docs/commands/`` (and every page there is a command)."""

from __future__ import annotations

import ast
import functools
import re
import shlex
from pathlib import Path

import pytest

from helpers import envkit

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
NEEDS_INDEX = {"compat", "scan", "history", "new-profile", "site", "lock", "lint"}
_VARIES = re.compile(r"[0-9]+(\.[0-9]+)? (MB|KB|B|s)\b")
# the pages where measurements are made and say how: every other timing points at them
MEASURED = (DOCS / "benchmarks.md", DOCS / "run-time.md")


def pages() -> list[Path]:
    """The README and every Markdown page under docs/."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


@functools.cache
def _read(path: Path) -> str:
    return path.read_text()


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def examples() -> list[tuple[str, str, list[str]]]:
    """(page, command, expected lines) of every ``$ envkit`` example, each once."""
    found: dict[tuple[str, tuple[str, ...]], str] = {}
    for path in pages():
        for block in re.findall(r"```text\n(.*?)```", _read(path), flags=re.S):
            first, *rest = block.rstrip("\n").split("\n")
            if first.startswith("$ envkit "):
                found.setdefault((first[len("$ envkit ") :], tuple(rest)), _name(path))
    return [(page, command, list(lines)) for (command, lines), page in found.items()]


def _param(page: str, command: str, lines: list[str]) -> object:
    network = shlex.split(command)[0] in NEEDS_INDEX
    marks = [pytest.mark.network] if network else []
    return pytest.param(page, command, lines, id=f"{page}: {command}", marks=marks)


def test_the_readme_has_examples_of_both_kinds() -> None:
    commands = [shlex.split(c)[0] for page, c, _ in examples() if page == "README.md"]
    assert "check-model" in commands and "compat" in commands


@pytest.mark.parametrize(("page", "command", "expected"), [_param(*e) for e in examples()])
def test_an_example_prints_what_its_page_shows(
    page: str, command: str, expected: list[str]
) -> None:
    args = shlex.split(command)
    if args[0] == "compat":  # the page shows a first run; another test may have cached it
        args.append("--no-cache")
    ran = envkit(*args, cwd=ROOT)
    assert ran.code in (0, 1), ran.err
    got = ran.out.rstrip("\n").split("\n")
    assert [_VARIES.sub("N", line) for line in got] == [
        _VARIES.sub("N", line) for line in expected
    ], f"{page}'s example of `envkit {command}` no longer matches its output"


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


# each count a page states, and how the repository counts it
COUNTS = {
    r"([0-9]+) test functions in ([0-9]+) files": lambda: _test_functions("test_*.py"),
    r"([0-9]+) test functions\s+in the ([0-9]+) `tests/\*\*/test_network_\*\.py` files": lambda: (
        _test_functions("test_network_*.py")
    ),
    r"([0-9]+) cells, all current": _shipped_cells,
}


@pytest.mark.parametrize("pattern", list(COUNTS))
def test_the_counts_the_pages_state_are_the_repositorys(pattern: str) -> None:
    said_on = {_name(path): re.findall(pattern, _read(path)) for path in pages()}
    assert any(said_on.values()), f"no page states {pattern!r} any longer"
    for page, found in said_on.items():
        for match in found:
            said = tuple(int(n) for n in (match if isinstance(match, tuple) else (match,)))
            assert said == COUNTS[pattern](), f"{page} says {match!r} for {pattern!r}"


_TIMING = re.compile(r"\b[0-9]+(\.[0-9]+)?(-[0-9.]+)? (s|min)\b")
# settings, not measurements: defaults, the HTTP deadline, serve's deadlines and polling
_NOT_A_MEASUREMENT = re.compile(
    r"default [0-9]+ s\b|[0-9]+ s\)?, redirects|[0-9.]+ s (deadline|to settle)\b|every [0-9]+ s\b"
)


def _prose(path: Path) -> str:
    """A page without its code blocks (examples: their output's seconds vary)."""
    return re.sub(r"```.*?```", "", _read(path), flags=re.S)


def test_every_timing_is_a_measurement_with_its_benchmark() -> None:
    """Outside the examples, a paragraph of any page that gives a time names where it was
    measured and how to measure it again: the Benchmarks page (which names the machine, the
    conditions and the script), or it is on one of the pages that measure."""
    bare = []
    for path in pages():
        if path in MEASURED:
            continue
        for _start, paragraph in _paragraphs(_prose(path)):
            prose = re.sub(r"`[^`]*`", "", paragraph)  # inline code: commands, sample lines
            timed = _TIMING.search(_NOT_A_MEASUREMENT.sub("", prose))
            if timed and "Benchmarks" not in paragraph:
                bare.append(f"{_name(path)}: {paragraph.strip()[:120]}")
    assert bare == [], "timings without their machine and benchmark:\n" + "\n".join(bare)
    benchmarks = _prose(DOCS / "benchmarks.md")
    # the timings table: the page's first table (later ones are results, not timings)
    first = benchmarks[benchmarks.index("\n| ") :].split("\n\n", 1)[0]
    rows = [line for line in first.splitlines() if line.startswith("| ") and "---" not in line]
    for row in rows[1:]:
        assert "benchmarks/" in row or "| the same" in row, row
    measured = "".join(_prose(path) for path in MEASURED)
    for script in sorted((ROOT / "benchmarks").glob("*.py")):
        if script.name != "machine.py":
            assert f"benchmarks/{script.name}" in measured, script.name


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


def test_every_environment_variable_envkit_reads_is_on_one_page() -> None:
    page = _read(DOCS / "environment.md")
    listed = set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)`", page, flags=re.M))
    read = environment_variables_read()
    assert read, "the scan found no variable: it no longer sees how envkit reads them"
    assert sorted(read - listed) == [], "read by envkit but missing from docs/environment.md"
    assert sorted(listed - read - _READ_BY_THE_LIBRARIES) == [], "listed but never read"


# read for envkit by the libraries it hands the work to (huggingface_hub, click, uv), or
# passed through to vLLM, and said on the page for that reason
_READ_BY_THE_LIBRARIES = {"HF_TOKEN", "HF_HUB_OFFLINE", "COLUMNS"}
