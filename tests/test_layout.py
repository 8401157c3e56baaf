"""The architecture's rules (docs/architecture.md), read from the source with ``ast``: who
prints, who starts processes, who runs uv, who speaks HTTP, which way imports point, and how
long a module may grow. A change that breaks one fails here, not in review."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path

import pytest
import sources

PACKAGE = sources.PACKAGE
MAX_LINES = 450  # "small enough to read in one go": about 400


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# each source file is read, parsed and walked once per process (tests/sources.py), whichever
# rules run: the rules below only look, so they share the trees and the walks (a rule that
# changes a graph changes its own copy)
def texts() -> dict[Path, str]:
    return {p: sources.text(p) for p in sources.files()}


@cache
def modules() -> dict[str, ast.Module]:
    return {_name(p): sources.tree(p) for p in sources.files()}


@cache
def _paths() -> dict[str, Path]:
    return {_name(p): p for p in sources.files()}


def nodes(name: str) -> tuple[ast.AST, ...]:
    """Every node of module ``name``, in ``ast.walk``'s order."""
    return sources.nodes(_paths()[name])


def imports(name: str) -> set[str]:
    """Every envkit module ``name`` imports, at the top or inside a function."""
    return set(_imports(name))


@cache
def _imports(name: str) -> frozenset[str]:
    known = modules()
    package = name if name in known and _is_package(name) else name.rpartition(".")[0]
    found: set[str] = set()
    for node in nodes(name):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                prefix = ".".join([*base, node.module] if node.module else base)
            else:
                prefix = node.module or ""
            if prefix in known and _is_package(prefix):
                found.add(prefix)  # `from pkg import sub` runs pkg/__init__ first
            for alias in node.names:
                sub = f"{prefix}.{alias.name}"
                if sub in known:
                    found.add(sub)
                elif prefix in known:
                    found.add(prefix)
    found.update(lazy_imports(known[name], known))
    found.discard(name)
    return frozenset(found)


def lazy_imports(tree: ast.Module, known: dict[str, ast.Module]) -> set[str]:
    """The modules a module imports by name at run time: the values of a module-level
    ``COMMAND_MODULES`` table (cli.group imports each command's module when it runs)."""
    found: set[str] = set()
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "COMMAND_MODULES" for t in node.targets)
            and isinstance(node.value, ast.Dict)
        ):
            found.update(
                v.value
                for v in node.value.values
                if isinstance(v, ast.Constant) and isinstance(v.value, str) and v.value in known
            )
    return found


@cache
def _is_package(name: str) -> bool:
    return (PACKAGE.parent / name.replace(".", "/") / "__init__.py").is_file()


@cache
def calls(name: str) -> tuple[str, ...]:
    """The dotted names ``name`` calls (``print``, ``click.echo``, ``subprocess.run``...)."""
    found: list[str] = []
    for node in nodes(name):
        if isinstance(node, ast.Call):
            parts: list[str] = []
            target: ast.expr = node.func
            while isinstance(target, ast.Attribute):
                parts.append(target.attr)
                target = target.value
            if isinstance(target, ast.Name):
                found.append(".".join([target.id, *reversed(parts)]))
    return tuple(found)


def test_the_rules_read_real_modules() -> None:
    """The readers above see what they must (else every rule below would pass vacuously)."""
    expected = {"envkit.cli", "envkit.render.term", "envkit.io.process", "envkit.io.uv"}
    assert expected <= set(modules())
    assert "envkit.render" in imports("envkit.cli.models")
    assert {"envkit.cli.models", "envkit.cli.serving"} <= imports("envkit.cli.group")  # lazy
    assert "envkit.render.term" in imports("envkit.render.models")
    assert {"click.echo", "click.style"} <= set(calls("envkit.render.term"))
    assert "subprocess.Popen" in set(calls("envkit.io.process"))
    assert "httpx.Client" in set(calls("envkit.io.http"))
    assert "uv_package.find_uv_bin" in set(calls("envkit.io.uv"))


def test_no_import_cycle() -> None:
    graph = {name: imports(name) for name in modules()}
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in path:
            cycle = " -> ".join((*path[path.index(name) :], name))
            pytest.fail(f"import cycle: {cycle}")
        if name in done:
            return
        for dep in sorted(graph[name]):
            visit(dep, (*path, name))
        done.add(name)

    for name in sorted(graph):
        visit(name, ())


# The packages from the bottom up (docs/architecture.md, "Packages"): a module may import its
# own package and any package below it, never one above. The root's modules (errors, results,
# the version) sit below everything.
ORDER = (
    "io", "profiles", "index", "releases", "gpu", "compat", "lock",
    "env", "fleet", "models", "serving", "upgrades", "image", "deploy", "site", "render", "cli",
)  # fmt: skip
ROOT_MODULES = {
    "envkit", "envkit.errors", "envkit.results", "envkit.progress", "envkit.syntax",
    "envkit.wording",
}  # fmt: skip


def package_of(name: str) -> str | None:
    """The package of ``name`` in ORDER, "" for the root's own modules, None if unplaced."""
    if name in ROOT_MODULES:
        return ""
    part = name.split(".")[1] if name.count(".") else ""
    return part if part in ORDER else None


def rank(package: str) -> int:
    return -1 if package == "" else ORDER.index(package)


def upward_imports(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """Each module's imports of a package above its own."""
    found: dict[str, list[str]] = {}
    for name, deps in graph.items():
        own = package_of(name)
        if own is None:
            continue
        up = sorted(d for d in deps if (p := package_of(d)) is not None and rank(p) > rank(own))
        if up:
            found[name] = up
    return found


def test_every_module_has_a_place_in_the_package_order() -> None:
    unplaced = [n for n in modules() if package_of(n) is None and n != "envkit.__main__"]
    assert unplaced == [], "add the package to ORDER (and docs/architecture.md) or move the module"
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert packages == set(ORDER), "ORDER must name every package, no more"


def test_lower_packages_never_import_higher_ones() -> None:
    graph = {name: imports(name) for name in modules()}
    assert upward_imports(graph) == {}


def test_the_order_rule_catches_an_upward_import() -> None:
    """The rule above is not vacuous: a core module importing the command line, or io
    importing a profile, is caught."""
    graph = {name: set(imports(name)) for name in modules()}
    graph["envkit.io.process"].add("envkit.profiles.profile")
    graph["envkit.releases.registry"].add("envkit.compat.check.checker")
    assert set(upward_imports(graph)) == {"envkit.io.process", "envkit.releases.registry"}


# The wings inside the big packages (docs/architecture.md, "Wings"), from the bottom up: each
# level a set of sub-packages ("" for the package's own modules). A module may import its own
# wing and any wing of a lower level, never one of its own level or above: published builds are
# read without the installed-environment assessor, the plan without the explain wing.
WINGS = {
    "gpu": ({""}, {"binaries"}, {"installed", "published"}),
    "serving": ({""}, {"lint", "plan"}, {"explain"}, {"run"}),
    "compat": ({""}, {"vllm", "transformers"}, {"check"}),
}


def wing_of(name: str) -> tuple[str, str] | None:
    """(package, wing) of an envkit module inside a winged package; wing "" for its own."""
    parts = name.split(".")
    if len(parts) < 3 or parts[1] not in WINGS:
        return None
    wing = parts[2] if len(parts) > 3 or _is_package(name) else ""
    return parts[1], wing


def wing_level(package: str, wing: str) -> int:
    return next(i for i, level in enumerate(WINGS[package]) if wing in level)


def wing_breaches(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """Each module's imports of another wing of its package at its own level or above."""
    found: dict[str, list[str]] = {}
    for name, deps in graph.items():
        own = wing_of(name)
        if own is None or name == f"envkit.{own[0]}.{own[1]}":
            continue
        bad = sorted(
            d
            for d in deps
            if (w := wing_of(d)) is not None
            and w[0] == own[0]
            and w[1] != own[1]
            and wing_level(*w) >= wing_level(*own)
        )
        if bad:
            found[name] = bad
    return found


def test_every_sub_package_is_a_declared_wing() -> None:
    found = {(p.parent.name, p.name) for p in PACKAGE.glob("*/*") if (p / "__init__.py").is_file()}
    declared = {(pkg, w) for pkg, levels in WINGS.items() for level in levels for w in level if w}
    assert found == declared, "declare the wing in WINGS (and docs/architecture.md)"
    for pkg, wing in declared:
        doc = ast.get_docstring(modules()[f"envkit.{pkg}.{wing}"])
        assert doc and len(doc) > 40, f"envkit/{pkg}/{wing}/__init__.py: say what it owns"


def test_wings_import_only_wings_below_them() -> None:
    graph = {name: imports(name) for name in modules()}
    assert wing_breaches(graph) == {}


def test_the_wing_rule_catches_a_sideways_or_upward_import() -> None:
    graph = {name: set(imports(name)) for name in modules()}
    graph["envkit.gpu.published.wheelkernels"].add("envkit.gpu.installed.assess")
    graph["envkit.serving.plan.planning"].add("envkit.serving.explain.causes")
    graph["envkit.gpu.arch"].add("envkit.gpu.binaries.elf")
    assert set(wing_breaches(graph)) == {
        "envkit.gpu.published.wheelkernels",
        "envkit.serving.plan.planning",
        "envkit.gpu.arch",
    }


def test_each_package_says_what_it_owns() -> None:
    for package in ORDER:
        doc = ast.get_docstring(modules()[f"envkit.{package}"])
        assert doc and len(doc) > 40, f"envkit/{package}/__init__.py: say what it owns"


def test_the_core_never_imports_the_command_line_or_render() -> None:
    entry = ("envkit.cli", "envkit.render", "envkit.__main__")
    core = [n for n in modules() if not n.startswith(entry)]
    offenders = {
        n: sorted(d for d in imports(n) if d.startswith(("envkit.cli", "envkit.render")))
        for n in core
    }
    assert {n: d for n, d in offenders.items() if d} == {}


# the streams: only render.term writes; env.inside_venv runs inside the checked venv (its stdout is
# what verify reads) and torchcuda's main is the maintainer's table generator
WRITES = {"print", "click.echo", "click.secho", "sys.stdout.write", "sys.stderr.write"}
MAY_WRITE = {
    "envkit.render.term",
    "envkit.env.inside_venv",
    "envkit.releases.torchbuilds",
    # the maintainer's kernel table generator, like torchbuilds
    "envkit.gpu.published.kernelupdate",
}
THREADS = {
    "threading.Thread",
    "threading.Timer",
    "Thread",
    "ThreadPoolExecutor",
    "concurrent.futures.ThreadPoolExecutor",
    "futures.ThreadPoolExecutor",
}
STARTS = {
    "subprocess.run",
    "subprocess.Popen",
    "subprocess.call",
    "subprocess.check_call",
    "subprocess.check_output",
    "os.system",
    "os.popen",
    "os.execv",
    "os.execvp",
    "os.spawnv",
}


@pytest.mark.parametrize(
    ("what", "names", "allowed"),
    [
        ("writes to stdout or stderr", WRITES, MAY_WRITE),
        # colour is added after term's escaping: text styled elsewhere would be escaped
        ("adds colour", {"click.style"}, {"envkit.render.term"}),
        ("starts a child process", STARTS, {"envkit.io.process"}),
        ("finds the uv binary", {"find_uv", "uv_package.find_uv_bin"}, {"envkit.io.uv"}),
        ("opens an HTTP client", {"httpx.Client", "urllib.request.urlopen"}, {"envkit.io.http"}),
        # every thread envkit starts leaves SIGINT and SIGTERM to the main thread
        ("starts a thread", THREADS, {"envkit.io.interrupts"}),
        # CPython 3.11's AST constructor fails when two threads parse at once: one lock
        ("parses Python source", {"ast.parse"}, {"envkit.syntax"}),
    ],
)
def test_one_module_owns_each_outside_effect(what: str, names: set[str], allowed: set[str]) -> None:
    offenders = {n: sorted(set(calls(n)) & names) for n in modules() if n not in allowed}
    assert {n: c for n, c in offenders.items() if c} == {}, f"only {allowed} {what}"


def test_modules_stay_readable_in_one_go() -> None:
    long = {
        p.relative_to(PACKAGE).as_posix(): n
        for p, text in texts().items()
        if (n := len(text.splitlines())) > MAX_LINES
    }
    assert long == {}, f"split modules over {MAX_LINES} lines by concern"


def test_json_is_written_with_every_character_that_is_not_ascii_escaped() -> None:
    """``ensure_ascii=False`` would let ESC, U+202E and U+2028 into JSON output unescaped."""
    raw = [
        name
        for name in modules()
        for node in nodes(name)
        if isinstance(node, ast.keyword)
        and node.arg == "ensure_ascii"
        and not (isinstance(node.value, ast.Constant) and node.value.value is True)
    ]
    assert raw == []


# files envkit is handed are read through envkit.io.files (a regular file under a cap, checked
# before reading); writes go through io.atomicfile; env.inside_venv runs inside the checked
# venv. Package data (a read of a path made from ``resources.files(...)``) is envkit's own.
MAY_OPEN = {
    "envkit.io.files",
    "envkit.io.atomicfile",
    "envkit.env.inside_venv",
    # ELF files opened non-blocking, checked regular, read by their layout
    "envkit.gpu.binaries.elf",
}
_READS = {"read_text", "read_bytes"}
# every way to open a file: open(), os.open, io.open, Path.open (any receiver: the AST does
# not know a Path from another object, so every .open() counts), os.fdopen, io.open_code
_OPENS = {"open", "fdopen", "open_code"}
# a member of a zip archive inflated within a cap: the archive was opened through io.files
# or is read by range over HTTP (module, the receiver's name)
ARCHIVE_MEMBERS = {
    ("envkit.index.wheels", "archive"),
    ("envkit.index.wheels", "self._zip"),  # a wheel on disk: opened by io.files.open_regular
    ("envkit.index.snapshot", "archive"),  # the snapshot read by io.files.read_small
}


def _package_data(path: ast.expr) -> bool:
    """``path`` is made from ``resources.files(...)`` (``/ "data" / NAME``, ``.joinpath``)."""
    return any(
        isinstance(sub, ast.Call) and ast.unparse(sub.func) in ("resources.files", "files")
        for sub in ast.walk(path)
    )


def _reads(walked: Iterable[ast.AST], module: str = "") -> Iterator[str]:
    """Every read or open among a module's nodes (``ast.walk``'s: :func:`nodes`)."""
    for node in walked:
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            yield f"open() at line {node.lineno}"
        elif isinstance(func, ast.Attribute):
            if func.attr in _READS:
                if not _package_data(func.value):
                    yield f".{func.attr}() at line {node.lineno}"
            elif func.attr in _OPENS:
                receiver = ast.unparse(func.value)
                if (module, receiver) not in ARCHIVE_MEMBERS:
                    yield f"{receiver}.{func.attr}() at line {node.lineno}"


def test_files_are_read_only_through_io_files() -> None:
    offenders = {n: list(_reads(nodes(n), n)) for n in modules() if n not in MAY_OPEN}
    assert {n: r for n, r in offenders.items() if r} == {}, "read files with envkit.io.files"
    assert [n for n in sorted(MAY_OPEN) if not list(_reads(nodes(n), n))] == []  # each does


def test_the_file_read_rule_catches_every_way_to_open_a_file() -> None:
    source = (
        "p.read_text()\nopen(x)\nos.open(x, 0)\n(site / 'torch' / 'version.py').open('rb')\n"
        "path.open(encoding='utf-8')\nos.fdopen(3)\nio.open(x)\nio.open_code(x)\n"
        "archive.open(info)\n"
    )
    assert len(list(_reads(ast.walk(ast.parse(source))))) == 9
    assert len(list(_reads(ast.walk(ast.parse(source)), "envkit.index.wheels"))) == 8


# an installed distribution's files (RECORD, METADATA) are files envkit is handed too: read
# through io.files (fleet.records, index.metadata); importlib.metadata reads them unchecked and
# whole, so only the module that runs inside the checked venv (and reports to it) uses it
MAY_READ_DISTRIBUTIONS = {"envkit.env.inside_venv"}
_METADATA = ("importlib.metadata", "importlib_metadata")


def _metadata_uses(walked: Iterable[ast.AST]) -> Iterator[str]:
    """Every import of importlib.metadata among a module's nodes (``ast.walk``'s)."""
    for node in walked:
        if isinstance(node, ast.Import):
            named = [a.name for a in node.names if a.name.startswith(_METADATA)]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            full = [f"{module}.{a.name}" for a in node.names]
            named = (
                [module] if module.startswith(_METADATA) else [n for n in full if n in _METADATA]
            )
        else:
            continue
        yield from (f"{n} at line {node.lineno}" for n in named)


def test_installed_distributions_are_read_only_through_io_files() -> None:
    offenders = {n: list(_metadata_uses(nodes(n))) for n in modules()}
    found = {n: r for n, r in offenders.items() if r and n not in MAY_READ_DISTRIBUTIONS}
    assert found == {}, "read RECORD and METADATA with envkit.io.files"
    assert [n for n in sorted(MAY_READ_DISTRIBUTIONS) if not offenders[n]] == []  # each does


def test_the_distribution_read_rule_catches_every_import() -> None:
    source = (
        "import importlib.metadata\nfrom importlib import metadata\n"
        "from importlib.metadata import PathDistribution\nimport importlib_metadata as m\n"
        "from importlib import resources\nimport importlib\n"
    )
    assert len(list(_metadata_uses(ast.walk(ast.parse(source))))) == 4


ARCHITECTURE = PACKAGE.parent.parent / "docs" / "architecture.md"


def _table_rows() -> dict[str, set[str]]:
    """docs/architecture.md's package table: each package (``root`` for envkit's own
    modules) and the modules its last column names."""
    rows: dict[str, set[str]] = {}
    for line in ARCHITECTURE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and (cells[0] == "root" or cells[0].startswith("`")):
            package = cells[0].strip("`").rstrip("/")
            rows[package] = {m.strip("` ") for m in cells[2].split(",") if m.strip()}
    return rows


def test_the_architecture_page_names_every_module_in_its_package() -> None:
    rows = _table_rows()
    assert "root" in rows and "io" in rows, "the package table was not found"
    actual: dict[str, set[str]] = {}
    for name in modules():
        parts = name.split(".")[1:]
        if not parts or name.endswith("__main__") or _is_package(name):
            continue
        package = ".".join(parts[:-1]).replace(".", "/") or "root"
        actual.setdefault(package, set()).add(parts[-1])
    wrong = {}
    for package in actual.keys() | rows.keys():
        have, named = actual.get(package, set()), rows.get(package, set())
        if have != named:
            wrong[package] = (sorted(have - named), sorted(named - have))
    assert wrong == {}, "package: (modules the page does not name, names with no module)"


def test_every_dotted_name_on_the_architecture_page_exists() -> None:
    """`pkg.module.name` references (or `module.name` inside a package) name real modules
    and their top-level definitions: a function that moved makes the page lie."""
    import re

    known = modules()
    packages = sorted({n for n in known if _is_package(n)}, key=len, reverse=True)
    outside = ("click.", "json.", "shlex.", "sys.", "obj.", "os.", "subprocess.")
    missing = []
    text = ARCHITECTURE.read_text()
    for ref in sorted(set(re.findall(r"`([a-z_]+(?:\.[A-Za-z_]+)+)`", text))):
        if ref.startswith(outside) or ref.endswith((".json", ".md", ".py", ".toml")):
            continue
        if not any(_resolves(known, f"{base}.{ref}") for base in packages) and ref not in known:
            missing.append(ref)
    assert missing == [], "named on docs/architecture.md but not found in the source"


def _resolves(known: dict[str, ast.Module], dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 1, -1):
        module = ".".join(parts[:cut])
        if module in known:
            return _defines(known[module], parts[cut:])
    return False


def _defines(tree: ast.Module, path: list[str]) -> bool:
    body: list[ast.stmt] = _with_type_checking(tree.body)
    for part in path:
        found = next((node for node in body if part in _bound_names(node)), None)
        if found is None:
            return False
        body = getattr(found, "body", [])
    return True


def _with_type_checking(body: list[ast.stmt]) -> list[ast.stmt]:
    """A module's statements with those of its ``if TYPE_CHECKING:`` block: the names a
    package resolves on first use (``envkit.render``'s ``__getattr__``) are imported there
    for the type checker."""
    out = list(body)
    for node in body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            out.extend(node.body)
    return out


def _bound_names(node: ast.stmt) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.ImportFrom):
        return [a.asname or a.name for a in node.names]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]


# dotted names in the source's docstrings and comments: a Sphinx role (:mod:`x.y`,
# :func:`~envkit.x.y`) or a double-backticked ``package.module[.name]``, whose first part is
# envkit or one of its packages; each is looked up as written, under envkit, and beside the
# module that names it (``logread.normalise`` in serving.explain.watch)
_ROLE_REF = re.compile(r":(?:mod|func|class|meth|data|attr|exc|obj):`~?([A-Za-z_][\w.]*)`")
_TICKED_REF = re.compile(r"``((?:envkit\.)?[a-z_]+(?:\.[A-Za-z_]\w*)+)``")
_FILE_NAMES = (".json", ".md", ".py", ".toml", ".txt", ".NAME")


def _stale_references(known: dict[str, ast.Module], sources: dict[str, str]) -> list[str]:
    packages = {n.split(".")[1] for n in known if n.count(".") >= 1}  # envkit's own names
    stale = []
    for module, text in sources.items():
        refs = [m.group(1) for m in _ROLE_REF.finditer(text)]
        refs += [m.group(1) for m in _TICKED_REF.finditer(text)]
        for ref in refs:
            head = ref.removeprefix("envkit.").split(".")[0]
            if "." not in ref or head not in packages or ref.endswith(_FILE_NAMES):
                continue
            here = module.rpartition(".")[0]
            tries = [ref] if ref.startswith("envkit.") else [f"envkit.{ref}", f"{here}.{ref}"]
            if not any(t in known or _resolves(known, t) for t in tries):
                stale.append(f"{module}: {ref}")
    return stale


def test_every_module_named_in_a_docstring_exists() -> None:
    """Stale names (a module moved into a wing, renamed, removed) do not stay in the source."""
    sources = {_name(p): text for p, text in texts().items()}
    assert _stale_references(modules(), sources) == []


def test_the_docstring_rule_catches_a_moved_module() -> None:
    text = '"""See :func:`gpu.kerneltable.lookup`, ``serving.mmbudget`` and ``lock.json``."""'
    found = _stale_references(modules(), {"envkit.lock.cells": text})
    assert found == [
        "envkit.lock.cells: gpu.kerneltable.lookup",
        "envkit.lock.cells: serving.mmbudget",
    ]
