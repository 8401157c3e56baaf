"""Who loads each vLLM source file, so that a compat finding breaks what really runs it.

A file is scoped by who imports it, not by the folder it sits in. The import graph is read
from the text of every ``vllm/`` file (import statements, found line by line with the
blocks around them: fast enough for the 3,000 files of a recent wheel, where parsing them
all would take half a minute). Three kinds of loader give a file its scope:

- vLLM as a whole: the modules a start-up imports (the package, its entry points, the
  config and tokenizer loaders, the model registry), and every file nothing in vLLM imports
  (loaded by a qualified name in a string: workers, platforms, the command line), with all
  they import;
- an architecture: the model file the registry maps it to (loaded on demand, by name), with
  what it imports;
- a model type: the config class vLLM's ``_CONFIG_REGISTRY`` maps it to, whose module a lazy
  package table (``_CLASS_TO_MODULE`` read by a module ``__getattr__``) loads on demand;
- a processor: a class of a lazy package table that vLLM looks up with a name it was given
  (``getattr(processors, name_from_the_processor_config, None)``) and that holds no config
  class ``_CONFIG_REGISTRY`` names (those are scoped by model type), when nothing else
  imports the module the table names for it.

A file's scope is the union of its loaders' (vLLM as a whole absorbs the rest). Inside a
file, a method of a registered config class runs only for that class's model types.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from envkit import syntax
from envkit.releases.asttables import SourceError, module_tables
from envkit.releases.registry import VLLM_CONFIG, VLLM_LAYOUTS

MODELS_DIR = "vllm/model_executor/models/"
CONFIGS_DIR = "vllm/transformers_utils/configs/"
# what a start-up imports, in the releases that have them
STARTUP = (
    "vllm",
    "vllm.entrypoints.llm",
    "vllm.entrypoints.openai.api_server",
    "vllm.entrypoints.cli.main",
    "vllm.engine.arg_utils",
    "vllm.transformers_utils.config",
    "vllm.transformers_utils.tokenizer",
    "vllm.tokenizers",
    "vllm.model_executor.models",
)
_IMPORT = re.compile(
    r"^([ \t]*)(?:from[ \t]+(\.+[\w.]*|vllm\b[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]+)"
    r"|import[ \t]+(vllm\b[\w.]*(?:[ \t]*,[ \t]*vllm\b[\w.]*)*))",
)
_STARTS_IMPORT = re.compile(r"[ \t]*(?:from|import)[ \t]+(?:\.|vllm\b)")
_HEADER = re.compile(
    r"(?:async[ \t]+)?(def|class|if|elif|else|try|except|finally|with|for|while)\b"
)
_CLASS = re.compile(r"^class[ \t]+(\w+)", re.M)
_LAZY_ENTRY = re.compile(r"[\"'](\w+)[\"'][ \t]*:[ \t]*[\"'](\.*[\w.]+)(?::\w+)?[\"']")


@dataclass(frozen=True)
class Scope:
    """What a finding at some place breaks: vLLM as a whole, or only these."""

    everywhere: bool
    architectures: tuple[str, ...] = ()
    model_types: tuple[str, ...] = ()
    processors: tuple[str, ...] = ()  # classes a lazy table loads by a name from a config
    conditions: tuple[str, ...] = ()  # checkpoint formats the code runs for (formats.py)

    @staticmethod
    def union(scopes: Iterable[Scope]) -> Scope:
        """What the places together break (vLLM as a whole when any of them does)."""
        listed = list(scopes)
        if not listed or any(s.everywhere for s in listed):
            return EVERYWHERE
        return Scope(
            False,
            *(
                tuple(sorted({v for s in listed for v in getattr(s, part)}))
                for part in ("architectures", "model_types", "processors", "conditions")
            ),
        )


EVERYWHERE = Scope(True)


def module_of(path: str) -> str:
    """``vllm/a/b.py`` -> ``vllm.a.b``; ``vllm/a/__init__.py`` -> ``vllm.a``."""
    stem = path[:-3]
    if stem.endswith("/__init__"):
        stem = stem[: -len("/__init__")]
    return stem.replace("/", ".")


def enclosing(lines: list[str], index: int) -> list[str]:
    """The block headers around line ``index`` (0-based), innermost first (``def f``,
    ``class C(Base)``, ``if TYPE_CHECKING``...), read from indentation."""
    text = lines[index]
    depth = len(text) - len(text.lstrip())
    out: list[str] = []
    j = index - 1
    while depth > 0 and j >= 0:
        line = lines[j]
        stripped = line.lstrip()
        j -= 1
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(stripped)
        if indent < depth and _HEADER.match(stripped):
            out.append(stripped)
            depth = indent
    return out


class Loaders:
    """The scope of every file of one vLLM release (see the module's docstring)."""

    def __init__(self, texts: Mapping[str, bytes]) -> None:
        self.paths = {module_of(p): p for p in texts if p.startswith("vllm/") and p.endswith(".py")}
        self.lines: dict[str, list[str]] = {}
        self.texts = texts
        self.lazy = self._lazy_tables()
        self.config_types = self._config_types()  # config class -> the model types it serves
        self.class_files = self._class_files()
        seeds: dict[str, set[str]] = defaultdict(set)
        registry = _registry_files(texts, self.paths)
        self.architectures = frozenset(a for archs in registry.values() for a in archs)
        for path, archs in registry.items():
            seeds[path].update(f"arch:{a}" for a in archs)
        for cls, types in self.config_types.items():
            for path in self.class_files.get(cls, ()):
                seeds[path].update(f"type:{t}" for t in types)
        for package, table in self.lazy.items():
            typed = any(m.startswith("type:") for t in table.values() for m in seeds.get(t, ()))
            if not typed and self._by_name(package):  # (a config table: by model type)
                for name, path in table.items():
                    if not seeds.get(path) or any(m.startswith("name:") for m in seeds[path]):
                        seeds[path].add(f"name:{name}")
        # a model or config module imported inside a function is loaded when that function
        # runs, for the models it serves: such an import does not make it vLLM-wide
        self.deferred: set[tuple[str, str]] = set()
        edges = self._edges(set(seeds))
        imported = {t for targets in edges.values() for t in targets}
        lazy_targets = {p for table in self.lazy.values() for p in table.values()}
        for module in STARTUP:
            if module in self.paths:
                seeds[self.paths[module]].add("*")
        files = set(self.paths.values())
        for path in texts:
            loaded_by_name = path in imported or path in seeds or path in lazy_targets
            if path in files and not loaded_by_name:
                seeds[path].add("*")
        self.scopes = _propagate(seeds, edges, self.deferred)

    def _text(self, path: str) -> list[str]:
        if path not in self.lines:
            self.lines[path] = self.texts[path].decode("utf-8", "replace").split("\n")
        return self.lines[path]

    def _lazy_tables(self) -> dict[str, dict[str, str]]:
        """Package -> {name: file} of tables its module ``__getattr__`` loads on demand."""
        out: dict[str, dict[str, str]] = {}
        for module, path in self.paths.items():
            data = self.texts[path]
            if not path.endswith("__init__.py") or b"def __getattr__" not in data:
                continue
            table = {}
            for name, target in _LAZY_ENTRY.findall(data.decode("utf-8", "replace")):
                found = self.paths.get(absolute(module, True, target))
                if found:
                    table[name] = found
            if table:
                out[module] = table
        return out

    def _by_name(self, package: str) -> bool:
        """Some vLLM file looks a class of ``package`` up with a name it was given
        (``getattr(processors, name, None)`` after ``from vllm.x import processors``)."""
        parent, _, last = package.rpartition(".")
        if not parent or package in STARTUP:
            return False
        needle = re.compile(rb"getattr\(\s*" + re.escape(last.encode()) + rb"\s*,\s*[A-Za-z_]")
        for path in self.paths.values():
            data = self.texts[path]
            if last.encode() in data and b"getattr(" in data and needle.search(data):
                return True
        return False

    def _edges(self, on_demand: set[str]) -> dict[str, set[str]]:
        """File -> the files it imports (at any level but for type checkers); imports of
        ``on_demand`` files inside a function are noted in ``self.deferred``."""
        edges: dict[str, set[str]] = defaultdict(set)
        for module, path in self.paths.items():
            if b"import" not in self.texts[path]:
                continue
            # split here, not kept: the lines of every file are some 20 MB of strings, and
            # only the few files a finding is in are split again (scope)
            lines = self.texts[path].decode("utf-8", "replace").split("\n")
            typing = b"TYPE_CHECKING" in self.texts[path]
            is_package = path.endswith("__init__.py")
            for number, line in enumerate(lines):
                if "import" not in line or not _STARTS_IMPORT.match(line):
                    continue
                statement = line
                if "(" in line and ")" not in line:  # from x import (a,\n b)
                    end = next((k for k in range(number, len(lines)) if ")" in lines[k]), number)
                    statement = " ".join(k.partition("#")[0] for k in lines[number : end + 1])
                match = _IMPORT.match(statement)
                if match is None:
                    continue
                targets = list(self._targets(module, is_package, match))
                indented = bool(match.group(1))
                wanted = indented and (typing or any(t in on_demand for t in targets))
                headers = enclosing(lines, number) if wanted else []
                if any(_is_type_checking(h) for h in headers):
                    continue
                if any(h.startswith(("def ", "async ")) for h in headers):
                    self.deferred.update((path, t) for t in targets if t in on_demand)
                edges[path].update(targets)
        return edges

    def _targets(self, module: str, is_package: bool, match: re.Match[str]) -> Iterable[str]:
        if match.group(4):
            names = [n.strip() for n in match.group(4).split(",")]
            return [p for n in names for p in self._with_parents(n)]
        source = absolute(module, is_package, match.group(2))
        found = list(self._with_parents(source))
        table = self.lazy.get(source, {})
        for item in match.group(3).strip("()").split(","):
            name = item.split()[0] if item.split() else ""
            if name in table:
                found.append(table[name])
            elif f"{source}.{name}" in self.paths:
                found.append(self.paths[f"{source}.{name}"])
        return found

    def _with_parents(self, module: str) -> Iterable[str]:
        parts = module.split(".")
        for end in range(1, len(parts) + 1):
            path = self.paths.get(".".join(parts[:end]))
            if path:
                yield path

    def _config_types(self) -> dict[str, tuple[str, ...]]:
        """Config class name -> the model types ``_CONFIG_REGISTRY`` reads with it."""
        text = self.texts.get(VLLM_CONFIG)
        if text is None:
            return {}
        try:
            tree = syntax.parse_module(text, VLLM_CONFIG)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return {}
        out: dict[str, list[str]] = defaultdict(list)
        for node in tree.body:
            target: ast.expr | None = node.target if isinstance(node, ast.AnnAssign) else None
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
            if not (isinstance(target, ast.Name) and target.id.startswith("_CONFIG_REGISTRY")):
                continue
            for model_type, cls in _registry_pairs(getattr(node, "value", None)):
                out[cls].append(model_type)
        return {k: tuple(sorted(set(v))) for k, v in out.items()}

    def _class_files(self) -> dict[str, tuple[str, ...]]:
        """Class name -> the files under ``transformers_utils/configs/`` defining it."""
        out: dict[str, list[str]] = defaultdict(list)
        for path, data in self.texts.items():
            if path.startswith(CONFIGS_DIR) and path.endswith(".py"):
                for name in _CLASS.findall(data.decode("utf-8", "replace")):
                    out[name].append(path)
        return {k: tuple(v) for k, v in out.items()}

    def file_scope(self, path: str) -> Scope:
        return _scope(self.scopes.get(path, {"*"}))

    def scope(self, path: str, line: int) -> Scope:
        """What a failure at ``path:line`` (1-based) breaks: the file's scope, or, inside a
        method of a registered config class, only that class's model types."""
        if path not in self.paths.values():
            return EVERYWHERE
        lines = self._text(path)
        if 0 < line <= len(lines):
            headers = enclosing(lines, line - 1)
            if headers and headers[0].startswith(("def ", "async ")):
                owner = next((h for h in headers if h.startswith("class ")), "")
                name = re.match(r"class[ \t]+(\w+)", owner)
                types = self.config_types.get(name.group(1), ()) if name else ()
                if types and path in self.class_files.get(name.group(1) if name else "", ()):
                    return Scope(False, (), types)
        return self.file_scope(path)


def _is_type_checking(header: str) -> bool:
    return re.match(r"if[ \t]+(?:typing\.)?TYPE_CHECKING[ \t]*:", header) is not None


def absolute(module: str, is_package: bool, target: str) -> str:
    """A relative module name (``.x``, ``..y.z``) made absolute from inside ``module``."""
    dots = len(target) - len(target.lstrip("."))
    if not dots:
        return target
    parts = module.split(".") if is_package else module.split(".")[:-1]
    if dots > 1:
        parts = parts[: len(parts) - (dots - 1)]
    rest = target[dots:]
    return ".".join([*parts, rest] if rest else parts)


def _registry_pairs(value: ast.expr | None) -> Iterable[tuple[str, str]]:
    """(model type, config class name) of ``{"t": Cls}`` and ``LazyConfigDict(t="Cls")``."""
    if isinstance(value, ast.Dict):
        for key, item in zip(value.keys, value.values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                name = _class_name(item)
                if name:
                    yield key.value, name
    elif isinstance(value, ast.Call):
        for keyword in value.keywords:
            name = _class_name(keyword.value)
            if keyword.arg and name:
                yield keyword.arg, name
        for arg in value.args:
            yield from _registry_pairs(arg)


def _class_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return ""


def _registry_files(texts: Mapping[str, bytes], paths: Mapping[str, str]) -> dict[str, set[str]]:
    """Model file -> the architectures the model registry maps to it."""
    for registry, names in VLLM_LAYOUTS:
        if registry not in texts:
            continue
        try:
            tables = module_tables(texts[registry].decode("utf-8", "replace"), filename=registry)
        except SourceError:
            return {}
        table = next((tables[n] for n in names if isinstance(tables.get(n), dict)), None)
        if table is None:
            continue
        out: dict[str, set[str]] = defaultdict(set)
        package = module_of(registry).rpartition(".")[0]
        for arch, value in table.items():
            if isinstance(value, (tuple, list)) and value and isinstance(value[0], str):
                path = paths.get(f"{package}.{value[0]}")
                if path:
                    out[path].add(str(arch))
        return out
    return {}


def _propagate(
    seeds: Mapping[str, set[str]],
    edges: Mapping[str, set[str]],
    deferred: set[tuple[str, str]],
) -> dict[str, set[str]]:
    """Each file's loaders: its own seeds and those of every file importing it (but vLLM as
    a whole through a deferred import)."""
    scopes: dict[str, set[str]] = defaultdict(set)
    for path, marks in seeds.items():
        scopes[path].update(marks)
    pending = list(scopes)
    while pending:
        path = pending.pop()
        marks = scopes[path]
        for target in edges.get(path, ()):
            have = scopes[target]
            if "*" in have:
                continue
            if (path, target) in deferred:
                new = marks - have - {"*"}
            else:
                new = {"*"} if "*" in marks else marks - have
            if new:
                have.update(new)
                if "*" in have:
                    have.intersection_update({"*"})
                pending.append(target)
    return scopes


def _scope(marks: set[str]) -> Scope:
    if "*" in marks or not marks:
        return EVERYWHERE
    return Scope(
        False,
        tuple(sorted(m[5:] for m in marks if m.startswith("arch:"))),
        tuple(sorted(m[5:] for m in marks if m.startswith("type:"))),
        tuple(sorted(m[5:] for m in marks if m.startswith("name:"))),
    )
