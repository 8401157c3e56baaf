"""What runs a function that a vLLM-wide file defines: code only some models reach.

A file that start-up imports (loading.py) breaks vLLM as a whole at import time, but the
body of one of its functions runs only when something calls it. Two shapes say who that is:

- a module-level function whose every use in vLLM is a call by name (in its own file, or
  in files importing it from there): it runs for what those calls run for (a helper only
  model files and per-model code call serves those models);
- a method of a class that a module-level table keyed by model type selects
  (``{"gemma4": Gemma4Convertor, ...}``, looked up with ``TABLE.get(config.model_type)``
  somewhere in vLLM) and that nothing else names: it runs for those model types only.

Anything else (the function passed around as a value, a name other files use without
importing it from there, a class used outside its table) keeps the file's own scope. At
every step, a line under a test of the checkpoint's format (formats.py: ``if
check_gguf_file(model):``) runs only for such checkpoints, and so does what it calls.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Mapping

from envkit.compat.vllm.loading import Loaders, Scope, absolute, module_of

MAX_DEPTH = 4  # calls followed through helpers calling helpers
Trees = Callable[[str], ast.Module | None]
Conditioned = Callable[[str, int], tuple[str, ...]]  # (path, line) -> checkpoint conditions


class Callers:
    """Narrows the scope of lines inside functions of vLLM-wide files (module docstring)."""

    def __init__(
        self,
        texts: Mapping[str, bytes],
        trees: Trees,
        loaders: Loaders,
        conditioned: Conditioned = lambda _p, _n: (),
    ) -> None:
        self.texts, self.trees, self.loaders = texts, trees, loaders
        self.conditioned = conditioned
        self._memo: dict[tuple[str, int], Scope] = {}

    def scope(self, path: str, line: int, depth: int = 0) -> Scope:
        """What a failure at ``path:line`` breaks: the loaders' scope, narrowed to the
        callers of the function around it when that scope is vLLM as a whole."""
        base = self.loaders.scope(path, line)
        if not base.everywhere or depth > MAX_DEPTH or (path, line) in self._memo:
            return self._memo.get((path, line), base)
        conditions = self.conditioned(path, line)
        if conditions:
            return Scope(False, conditions=conditions)
        self._memo[(path, line)] = base  # a cycle of calls keeps the file's scope
        tree = self.trees(path)
        owner = _top_level(tree, line) if tree is not None else None
        found: Scope | None = None
        if isinstance(owner, ast.ClassDef) and tree is not None:
            types = self._dispatched(path, tree, owner)
            found = Scope(False, (), types) if types else None
        elif isinstance(owner, (ast.FunctionDef, ast.AsyncFunctionDef)):
            sites = self._call_sites(path, owner.name)
            if sites:
                found = _union([self.scope(p, n, depth + 1) for p, n in sites])
        self._memo[(path, line)] = found or base
        return found or base

    def _call_sites(self, path: str, name: str) -> list[tuple[str, int]] | None:
        """Every place vLLM calls module-level function ``name`` of ``path``; None when it
        is used in any other way or cannot be told."""
        module, needle = module_of(path), name.encode()
        sites: list[tuple[str, int]] = []
        for other, data in self.texts.items():
            if needle not in data or not other.endswith(".py"):
                continue
            tree = self.trees(other)
            if tree is None:
                return None
            if any(isinstance(n, ast.Attribute) and n.attr == name for n in ast.walk(tree)):
                return None  # module.name: called or passed through its module
            bound = name if other == path else _imported_as(tree, other, module, name)
            if bound is None:
                named = any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(tree))
                if not named or _defines(tree, name):
                    continue  # mentioned in text only, or a function of its own by that name
                return None
            found = _calls(tree, bound)
            if found is None:
                return None
            sites.extend((other, n) for n in found)
        return sites

    def _dispatched(self, path: str, tree: ast.Module, cls: ast.ClassDef) -> tuple[str, ...]:
        """The model types a table of ``path`` selects ``cls`` (or a subclass) for, when
        it is looked up by model type and nothing else names those classes."""
        family = _subclasses(tree, cls.name)
        types: set[str] = set()
        for table, entries in _tables(tree):
            keys = {k for k, v in entries if v in family}
            if keys and self._by_model_type(table):
                types |= keys
        if not types or not self._only_in_tables(path, tree, family):
            return ()
        return tuple(sorted(types))

    def _by_model_type(self, table: str) -> bool:
        pattern = re.compile(
            rb"\b" + re.escape(table.encode()) + rb"\s*(?:\.get\(|\[)\s*[\w.]*model_type\b"
        )
        return any(pattern.search(data) for data in self.texts.values())

    def _only_in_tables(self, path: str, tree: ast.Module, family: set[str]) -> bool:
        """The classes are named only in their file: by their tables and class bases."""
        words = [re.compile(rb"\b" + re.escape(n.encode()) + rb"\b") for n in family]
        for other, data in self.texts.items():
            if other != path and any(w.search(data) for w in words):
                return False
        allowed = {
            id(b) for node in tree.body if isinstance(node, ast.ClassDef) for b in node.bases
        }
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict):
                allowed.update(id(v) for v in node.value.values)
        return not any(
            isinstance(n, ast.Name) and n.id in family and id(n) not in allowed
            for n in ast.walk(tree)
        )


def _top_level(tree: ast.Module, line: int) -> ast.stmt | None:
    """The module-level function, or the class whose method, holding ``line``."""
    for node in tree.body:
        end = node.end_lineno or node.lineno
        if not node.lineno <= line <= end:
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
        if isinstance(node, ast.ClassDef):
            inside = any(
                isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                and m.lineno < line <= (m.end_lineno or m.lineno)
                for m in node.body
            )
            return node if inside else None
    return None


def _imported_as(tree: ast.Module, path: str, module: str, name: str) -> str | None:
    """The name ``path`` binds ``module.name`` to with ``from ... import``, if it does."""
    package = path.endswith("__init__.py")
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        source = absolute(module_of(path), package, "." * node.level + (node.module or ""))
        if source != module:
            continue
        for alias in node.names:
            if alias.name == name:
                return alias.asname or name
    return None


def _defines(tree: ast.Module, name: str) -> bool:
    return any(
        isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name
        for n in ast.walk(tree)
    )


def _calls(tree: ast.Module, name: str) -> list[int] | None:
    """The lines calling ``name(...)``; None when the name is also used another way."""
    called: set[int] = set()
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
            called.add(id(node.func))
            lines.append(node.lineno)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == name and id(node) not in called:
            return None
    return lines


def _subclasses(tree: ast.Module, name: str) -> set[str]:
    """``name`` and the classes of the module deriving from it, at any depth."""
    family = {name}
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    grew = True
    while grew:
        grew = False
        for node in classes:
            bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
            if node.name not in family and bases & family:
                family.add(node.name)
                grew = True
    return family


def _tables(tree: ast.Module) -> Iterable[tuple[str, list[tuple[str, str]]]]:
    """Module-level ``NAME = {"key": Class, ...}`` tables: (NAME, [(key, class name)])."""
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and node.targets else None
        if isinstance(node, ast.AnnAssign):
            target = node.target
        value = getattr(node, "value", None)
        if not (isinstance(target, ast.Name) and isinstance(value, ast.Dict)):
            continue
        entries = [
            (k.value, v.id)
            for k, v in zip(value.keys, value.values, strict=True)
            if isinstance(k, ast.Constant) and isinstance(k.value, str) and isinstance(v, ast.Name)
        ]
        if entries:
            yield target.id, entries


def _union(scopes: list[Scope]) -> Scope | None:
    found = Scope.union(scopes)
    return None if found.everywhere else found
