"""vLLM's source files as compat reads them: each parsed once, with the lines the target
transformers release cannot run (guards.py), the model types a ``model_type`` test limits a
block to, the names standing for transformers types (receivers.py), and what a finding at
some place breaks (loading.py, callers.py, formats.py)."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping

from packaging.version import Version

from envkit.compat import apisurface, receivers
from envkit.compat.apisurface import Use
from envkit.compat.transformers.transformers_source import TransformersRelease
from envkit.compat.vllm.callers import Callers
from envkit.compat.vllm.conditions import INSTALLED
from envkit.compat.vllm.formats import Formats
from envkit.compat.vllm.guards import Guards, within
from envkit.compat.vllm.loading import Loaders, Scope

# a module that may compute a flag from transformers' version (else none is looked for)
_VERSIONED = re.compile(rb"__version__|version\(\s*[\"']transformers|TRANSFORMERS")


class ReleaseProbe:
    """What the guards ask of the target release, its modules read on demand."""

    def __init__(self, release: TransformersRelease, absent: frozenset[str] = frozenset()) -> None:
        """``absent``: attribute names the release's classes surely lack (those a
        removed-attribute finding is made of, but for names vLLM defines too)."""
        self.release = release
        self.version = release.version
        self.absent = absent

    def module_exists(self, module: str) -> bool | None:
        self.release.load([module.rpartition(".")[0]])
        return self.release.module_exists(module)

    def provides(self, module: str, name: str) -> bool | None:
        self.release.load([module])
        return self.release.provides(module, name)

    def has_member(self, module: str, cls: str, name: str) -> bool | None:
        return self.release.has_member(module, cls, name)

    def lacks(self, name: str) -> bool:
        return name in self.absent


class Sources:
    """vLLM's source files, each parsed once, with the lines the target release cannot run."""

    def __init__(self, texts: Mapping[str, bytes]) -> None:
        self.texts = texts
        self.probe: ReleaseProbe | None = None
        self._trees: dict[str, ast.Module | None] = {}
        # a tree read for a module's flags, kept until its guards are read (refusals reads
        # every file whose guards may raise): one parse for both, not two
        self._held: dict[str, ast.Module | None] = {}
        self._dead: dict[str, list[tuple[int, int]]] = {}
        self._only: dict[str, list[tuple[int, int, tuple[str, ...]]]] = {}
        self._refused: dict[str, list[tuple[int, str]]] = {}
        self._flags: dict[str, dict[str, object]] = {}
        self._types: dict[str, set[str]] = {}
        self._callers: Callers | None = None
        self.paths = {p[:-3].removesuffix("/__init__").replace("/", "."): p for p in texts}

    def passing(self, path: str) -> ast.Module | None:
        """The file's tree for one look, not kept (a tree takes some thirty times its
        source's bytes: compat keeps only the trees a later step asks for again; the imports
        of every file are read by apisurface.imports_in, from the blocks that hold them)."""
        if path in self._trees:
            return self._trees[path]
        if path in self._held:
            return self._held[path]
        data = self.texts.get(path)
        return apisurface.parse(data, path) if data is not None else None

    def tree(self, path: str) -> ast.Module | None:
        if path in self._held:
            self._trees[path] = self._held.pop(path)
        if path not in self._trees:
            data = self.texts.get(path)
            self._trees[path] = apisurface.parse(data, path) if data is not None else None
        return self._trees[path]

    def flags(self, module: str) -> Mapping[str, object]:
        """The known module-level values of a vLLM module (a flag another file imports)."""
        if module not in self._flags:
            self._flags[module] = {}  # a cycle of imports sees nothing
            path = self.paths.get(module, "")
            text = self.texts.get(path, b"")
            tree = self.passing(path) if _VERSIONED.search(text) else None
            if path not in self._dead and _may_refuse(path, text):
                self._held[path] = tree
            if tree is not None and self.probe is not None:
                values = Guards(tree, self.probe, self.flags).module_values()
                self._flags[module] = {
                    k: v
                    for k, v in values.items()
                    if isinstance(v, (bool, Version)) or v is INSTALLED
                }
        return self._flags[module]

    def types(self, path: str) -> set[str]:
        """The names standing for transformers types in a file (receivers.py)."""
        if path not in self._types:
            self._types[path] = set()  # a cycle of imports sees nothing
            tree = self.tree(path)
            if tree is not None:
                self._types[path] = receivers.transformers_types(
                    tree, lambda m, n: n in self.types(self.paths.get(m, ""))
                )
        return self._types[path]

    def _guard(self, path: str) -> None:
        if path not in self._dead:
            tree = self.passing(path)  # what the guards found is kept, not the tree
            self._held.pop(path, None)
            guards = Guards(tree, self.probe, self.flags) if tree and self.probe else None
            self._dead[path] = guards.dead_lines() if guards else []
            self._only[path] = guards.only if guards else []
            self._refused[path] = guards.refusals if guards else []

    def refusals(self) -> list[tuple[str, int, str]]:
        """``(file, line, message)`` of each module-level raise the release sets off (a
        condition on its version, or a probe of it, that holds)."""
        out: list[tuple[str, int, str]] = []
        for path, data in self.texts.items():
            if _may_refuse(path, data):
                self._guard(path)
                out.extend((path, line, message) for line, message in self._refused[path])
        return out

    def live(self, path: str, line: int) -> bool:
        """The line can run with the target release (False only when a guard rules it out)."""
        if self.probe is None:
            return True
        self._guard(path)
        return not within(self._dead[path], line)

    def scope(self, loaders: Loaders, use: Use) -> Scope:
        """What a failure at the use breaks: the model types a ``model_type`` test around it
        names, else what loads its code, narrowed to what calls the function around it
        (callers.py) and to the checkpoints of a format tested on the way (formats.py)."""
        self._guard(use.file)
        types = {
            t for a, b, found in self._only.get(use.file, ()) if a <= use.line <= b for t in found
        }
        if types:
            return Scope(False, (), tuple(sorted(types)))
        if self._callers is None or self._callers.loaders is not loaders:
            formats = Formats(self.texts, self.tree)
            self._callers = Callers(self.texts, self.tree, loaders, formats.conditions)
        return self._callers.scope(use.file, use.line)


def _may_refuse(path: str, data: bytes) -> bool:
    """A module-level raise may hang on the release's version here (refusals reads it)."""
    return path.endswith(".py") and b"raise" in data and _VERSIONED.search(data) is not None
