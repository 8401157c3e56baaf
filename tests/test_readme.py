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
import itertools
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
import sources

from helpers import envkit

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
NEEDS_INDEX = {"compat", "scan", "history", "new-profile", "site", "lock", "lint", "upgrade"}
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


def test_the_readme_sets_up_with_two_commands_and_ci_runs_its_test_command() -> None:
    """A newcomer pastes two commands on a fresh machine: one installs envkit and runs its
    main job, one runs the whole test suite; `.ci/run` ends in that same test command."""
    setup = _read(ROOT / "README.md").split("\n## Set up\n", 1)[1].split("\n## ", 1)[0]
    commands = [b.strip() for b in re.findall(r"```sh\n(.*?)```", setup, flags=re.S)]
    assert len(commands) == 2 and all("\n" not in c for c in commands), commands
    install, test = commands
    assert install.startswith("python3 -m pip install -e . && envkit build "), install
    assert test.endswith("python3 -m pytest"), test
    ci = (ROOT / ".ci" / "run").read_text().rstrip("\n").split("\n")
    assert ci[-1] == test, ".ci/run no longer ends in the README's test command"


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


@functools.cache  # a page may state a count more than once: the tests are parsed once for all
def _test_functions(pattern: str) -> tuple[int, int]:
    files = sorted((ROOT / "tests").rglob(pattern))
    found = sum(
        1
        for path in files
        for node in _statements(sources.parse(path.read_text(), str(path)).body)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
    )
    return found, len(files)


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of a block and of the blocks inside it (a function is defined by a
    statement only: the expressions need no walk)."""
    for statement in body:
        yield statement
        blocks = [getattr(statement, f, []) for f in ("body", "orelse", "finalbody")]
        blocks += [h.body for h in getattr(statement, "handlers", [])]
        blocks += [c.body for c in getattr(statement, "cases", [])]
        for block in blocks:
            if isinstance(block, list):
                yield from _statements(block)


def _shipped_cells() -> tuple[int]:
    from envkit.lock.cells import cells
    from envkit.profiles.catalog import Catalog

    listing = Catalog.from_option(str(ROOT / "envs")).list()
    return (sum(len(cells(p)) for p in listing.profiles),)


# each count a page states, and how the repository counts it
_NETWORK_FILES = r"`tests/\*\*/test_network_\*\.py`"
COUNTS = {  # words may fold onto the next line anywhere
    r"([0-9]+)\s+test\s+functions\s+in\s+([0-9]+)\s+files": lambda: _test_functions("test_*.py"),
    rf"([0-9]+)\s+test\s+functions\s+in\s+the\s+([0-9]+)\s+{_NETWORK_FILES}\s+files": lambda: (
        _test_functions("test_network_*.py")
    ),
    r"([0-9]+)\s+cells,\s+all\s+current": _shipped_cells,
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
    for path in sources.files():
        for node in sources.nodes(path):
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


_LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, markup and punctuation dropped but
    hyphens and underscores, each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", _prose(path), flags=re.M):
        slug, n = _slug(heading), 1
        while slug in found:  # GitHub numbers a repeated heading's anchor
            slug, n = f"{_slug(heading)}-{n}", n + 1
        found.add(slug)
    return found


def broken_links(path: Path, text: str) -> list[str]:
    """The relative links of ``text`` (a page at ``path``) to no file, or to no heading."""
    broken = []
    prose = re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))
    for target in _LINK.findall(prose):  # code shows links, it does not make them
        if re.match(r"[a-z]+:", target):  # https:, mailto:: not a file of ours
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        if not linked.exists():
            broken.append(f"{_name(path)}: {target} (no such file)")
        elif anchor and (linked.suffix != ".md" or anchor not in anchors(linked)):
            broken.append(f"{_name(path)}: {target} (no such heading)")
    return broken


def test_every_relative_link_leads_to_a_file_and_heading_that_exist() -> None:
    broken = [link for path in pages() for link in broken_links(path, _read(path))]
    assert broken == [], "\n".join(broken)


def test_the_link_check_bites() -> None:
    page = DOCS / "commands" / "build.md"
    text = "[a](../gpu.md) [b](../gone.md) [c](../gpu.md#aarch64) [d](../gpu.md#gone) [e](#gone)"
    assert broken_links(page, text) == [
        "docs/commands/build.md: ../gone.md (no such file)",
        "docs/commands/build.md: ../gpu.md#gone (no such heading)",
        "docs/commands/build.md: #gone (no such heading)",
    ]
    assert broken_links(page, "`[x](nowhere.md)` and [y](https://example.org/z)") == []


def test_the_anchor_of_a_heading_is_githubs() -> None:
    assert _slug("The GPU layer (verify, build, doctor)") == "the-gpu-layer-verify-build-doctor"
    assert _slug("Before install: the kernel table") == "before-install-the-kernel-table"
    assert _slug("`compat` against run time") == "compat-against-run-time"
    assert _slug("The published files, without envkit") == "the-published-files-without-envkit"


def commands_of_the_help() -> list[str]:
    """The commands `envkit --help` lists."""
    ran = envkit("--help", cwd=ROOT)
    listing = ran.out.split("\nCommands:\n", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^  ([a-z][a-z-]*)  ", listing, flags=re.M)


def test_every_command_has_its_page_and_every_page_is_a_command() -> None:
    commands = commands_of_the_help()
    assert "build" in commands and "fleet" in commands, commands
    written = sorted(path.stem for path in (DOCS / "commands").glob("*.md"))
    assert sorted(set(commands) - set(written)) == [], "commands without a page in docs/commands/"
    assert sorted(set(written) - set(commands)) == [], "pages of docs/commands/ of no command"
    readme = _read(ROOT / "README.md")
    unlinked = [c for c in commands if f"(docs/commands/{c}.md)" not in readme]
    assert unlinked == [], "the README's table of commands lacks these"


def _options(words: list[str]) -> tuple[str, set[str]] | None:
    """The command a line of a page runs (``fleet check`` for a group's) and the options it
    takes, envkit's own included; None when the line names no command (``envkit CMD``)."""
    from envkit.cli.group import COMMAND_MODULES, load

    name = next((w for w in words if not w.startswith("-") and w != "DIR"), "")
    if name not in COMMAND_MODULES:
        assert not re.fullmatch(r"[a-z][a-z-]*", name), f"envkit has no command {name!r}"
        return None
    command = load(name)
    after = words[words.index(name) + 1 :]
    subcommands = getattr(command, "commands", {})
    if subcommands and after and after[0] in subcommands:
        command, name = subcommands[after[0]], f"{name} {after[0]}"
    flags = {"--help", "-h", "--version", "--envs", "--wide"}
    for param in command.params:
        flags |= set(getattr(param, "opts", ())) | set(getattr(param, "secondary_opts", ()))
    return name, flags


def _envkit_lines(path: Path) -> list[str]:
    """Every envkit command line a page shows: in its code blocks (an indented line or one
    ending in a backslash continues the one above) and its inline code."""
    text = _read(path)
    lines: list[str] = []
    for kind, block in re.findall(r"```([a-z]*)\n(.*?)```", text, flags=re.S):
        # in a shell block a command may sit anywhere on a line; elsewhere (usage, output) a
        # command starts its line, and an output line's prose ("where envkit looks") is none
        command = (
            r"\benvkit [a-z-]" if kind in ("sh", "bash", "console") else r"^(\$ )?envkit [a-z-]"
        )
        for line in block.split("\n"):
            above = lines[-1] if lines else ""
            options = line.startswith(" ") and line.lstrip().startswith(("[", "(", "--"))
            if above and (options or above.endswith("\\")):
                lines[-1] = above.rstrip("\\") + " " + line.strip()
                continue
            lines.append(line if re.search(command, line) else "")
    lines += re.findall(r"`(envkit [^`]*)`", re.sub(r"```.*?```", "", text, flags=re.S))
    return [line for line in lines if line]


# where one command ends: `&&`, `;`, a comment, a quote, or a pipe (a `|` between spaces that
# is not a usage line's alternative: `[--gpu NAME | --compute-capability X.Y]`)
_END_OF_RUN = re.compile(r"&&|;|#|['\"]|\s\|\s+(?![-\[(])")


def unknown_options(line: str) -> list[str]:
    """The options a line of a page gives envkit's commands that they do not have."""
    unknown = []
    for found in re.finditer(r"\benvkit ", line):
        run = _END_OF_RUN.split(line[found.end() :], maxsplit=1)[0]
        run = re.split(r"(?<![\w-])--(?=[\s\]]|$)", run)[0]  # past `--`: vLLM's own
        known = _options(run.split())
        if known is not None:
            name, flags = known
            used = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-z])\b", run))
            unknown += [f"envkit {name} {flag}" for flag in sorted(used - flags)]
    return unknown


def test_every_option_a_page_shows_is_its_commands_own() -> None:
    """What a page shows of a command (its usage, an example, a command in the prose) uses
    only options the command has: a renamed or removed option fails here."""
    unknown = [
        f"{_name(path)}: {option}"
        for path in pages()
        for line in _envkit_lines(path)
        for option in unknown_options(line)
    ]
    assert sorted(set(unknown)) == [], "options the commands do not have"


def test_the_option_check_bites() -> None:
    assert unknown_options(
        "$ envkit --envs DIR build X --venv V --bogus && envkit show --gone"
    ) == [
        "envkit build --bogus",
        "envkit show --gone",
    ]
    assert unknown_options("envkit fleet check P --ray auto --cells C") == [
        "envkit fleet check --cells"
    ]
    assert unknown_options("envkit serve P M --check -- --enable-reasoning --port 1") == []
    assert unknown_options("envkit CMD --help") == []
    assert unknown_options("envkit plan P M [--gpu N | --gpu-mem S] | grep -v x") == [
        "envkit plan --gpu-mem"
    ]
    with pytest.raises(AssertionError, match="no command 'biuld'"):
        unknown_options("envkit biuld X")


def test_no_page_says_a_thing_twice() -> None:
    """A merge that keeps both sides leaves a line written twice in a row, or a table with
    two rows for one thing (an old and a new row for a package): neither is on any page."""
    for page in pages():
        lines = _read(page).splitlines()
        for number, (line, after) in enumerate(itertools.pairwise(lines), 2):
            assert not (line.strip() and line == after), f"{_name(page)}:{number}: {line!r}"
        tables: list[list[str]] = [[]]
        for line in lines:
            if line.startswith("|"):
                tables[-1].append(line)
            elif tables[-1]:
                tables.append([])
        for table in tables:
            firsts = [row.split("|")[1].strip() for row in table[2:]]  # past head and rule
            twice = sorted({first for first in firsts if firsts.count(first) > 1})
            assert not twice, f"{_name(page)}: a table has two rows for {twice}"
