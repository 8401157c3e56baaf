"""One transformers release as its source says: what each module provides and what each
class defines or inherits, read from the wheel on demand (batched range reads, ``ast``).

Module names are resolved as transformers resolves them at run time: files and packages,
module aliases it registers (tfaliases.py: literal, in a loop over its files, or by a
pattern), lazy ``_import_structure`` tables, packages that re-export every module of their
folder (``define_import_structure(_file)``), ``from .x import *``, and the names a lazy
package or an alias module answers with another (5.x's ``XImageProcessorFast`` for
``XImageProcessor``). What
the source cannot settle (a catalogue of hundreds of model packages, a base class outside
transformers and the standard library) is None, never a guess; but a catalogue's config
classes (``FalconH1Config``) are settled by the models' configuration modules, which compat
reads whole.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import sys
import threading
from collections.abc import Iterable

from envkit.compat import apisurface
from envkit.compat.transformers.modulefacts import ClassFacts, ModuleFacts, module_facts
from envkit.compat.transformers.tfaliases import IMPORT_UTILS, INIT, AliasRules, read_rules
from envkit.index.pages import WheelFile
from envkit.index.wheels import RemoteZip
from envkit.io.http import Http

MAX_STARS = 16  # a package re-exporting more modules than this is a catalogue (transformers.models)
AUTO_DIR = "transformers/models/auto/"
MODELS_PACKAGE = "transformers.models."
_ONE_TREE = threading.Lock()
_CLASS_STRING = re.compile(rb"[\"']([A-Z][A-Za-z0-9_]*)[\"']")

Located = tuple[str, ClassFacts] | type | None


class TransformersRelease:
    """One transformers wheel, its modules read on demand (in batches, by range)."""

    def __init__(self, wheel: WheelFile, http: Http, *, body_only: bool = False) -> None:
        """``body_only``: a class's names are those its body defines (methods, properties,
        class attributes), not those its methods set on ``self`` (the reference side, so that
        a name counts as gone only when the class surely had it)."""
        self.wheel = wheel
        self.version = wheel.version
        self.body_only = body_only
        self.zip = RemoteZip(wheel.url, http)
        self.facts: dict[str, ModuleFacts | None] = {}
        self.aliases: dict[str, str] = {}
        self._exported: frozenset[str] | None = None  # read once, when a catalogue is asked
        # the classes the models' configuration modules define (when they were all read)
        self.config_classes: frozenset[str] = frozenset()
        self._rules: AliasRules | None = None

    @property
    def rules(self) -> AliasRules:
        """The release's module aliases and name fallbacks (its two sources read once)."""
        if self._rules is None:
            self._rules = read_rules(self.zip.read([INIT, IMPORT_UTILS]), self.zip.members)
        return self._rules

    def resolve(self, module: str) -> str:
        """The module ``module`` stands for at run time (itself when it is no alias)."""
        if module in self.aliases:
            return self.aliases[module]
        if self.path(module) is None and module.startswith("transformers."):
            target = self.rules.target(module)
            if target is not None and self.path(target):
                return target
        return module

    def path(self, module: str) -> str | None:
        base = module.replace(".", "/")
        for candidate in (f"{base}.py", f"{base}/__init__.py"):
            if candidate in self.zip.members:
                return candidate
        return None

    def _siblings(self, init: str) -> list[str]:
        """The modules in the folder of a package's ``__init__.py``."""
        folder = init[: -len("__init__.py")]
        return sorted(
            n[:-3].replace("/", ".")
            for n in self.zip.members
            if n.startswith(folder)
            and n.endswith(".py")
            and "/" not in n[len(folder) :]
            and n != init
        )

    def load(self, modules: Iterable[str]) -> None:
        """Read and parse ``modules``, then what they re-export, in a few batched rounds."""
        pending = {self.resolve(m) for m in modules} - set(self.facts)
        for _round in range(4):
            if not pending:
                return
            paths = {m: self.path(m) for m in pending}
            texts = self.zip.read(p for p in paths.values() if p)
            follow: set[str] = set()
            for module, path in paths.items():
                # each text and tree let go once read: one tree alive at a time
                facts = _facts(texts.pop(path), module, path) if path in texts else None
                if facts is None or path is None:
                    self.facts[module] = None
                    continue
                if facts.scans_folder and path.endswith("__init__.py"):
                    facts = dataclasses.replace(facts, stars=(*facts.stars, *self._siblings(path)))
                self.facts[module] = facts
                self.aliases.update(facts.aliases)
                follow.update(target for _alias, target in facts.aliases)
                if len(facts.stars) <= MAX_STARS:
                    follow.update(facts.stars)
            pending = follow - set(self.facts)

    def module_exists(self, module: str) -> bool | None:
        """True, False, or None when only a lazy table of the parent mentions it."""
        if self.path(self.resolve(module)):
            return True
        parent, _dot, last = module.rpartition(".")
        facts = self.facts.get(parent)
        return None if facts is not None and last in facts.names else False

    def provides(self, module: str, name: str, depth: int = 0) -> bool | None:
        """Whether ``from module import name`` works; None when the source cannot say. A
        name the module's ``__getattr__`` answers with a shorter one (a lazy package, an
        alias module) is provided when that one is."""
        target = self.resolve(module)
        found = self._provides(target, name, depth)
        facts = self.facts.get(target)
        if found is not True and facts is not None:
            aliased = target != module and module not in self.aliases
            shorter = (
                self.rules.fallbacks(name, alias=aliased) if aliased or facts.lazy_module else []
            )
            if any(self._provides(target, n, depth) for n in shorter):
                return True
        return found

    def _provides(self, module: str, name: str, depth: int = 0) -> bool | None:
        facts = self.facts.get(module)
        if facts is None and depth and module in self.facts and self.path(module) is None:
            return False  # a star import of a module the wheel lacks brings nothing
        if facts is None or depth > 4:
            return None
        if name in facts.names or self.path(f"{module}.{name}"):
            return True
        if len(facts.stars) > MAX_STARS:
            if name in self.exported_models():
                return True
            if self.config_classes and name.endswith("Config"):
                # model config classes live in the models' configuration modules, read whole
                return name in self.config_classes
            return None
        answers = [self._provides(star, name, depth + 1) for star in facts.stars]
        if any(answers):
            return True
        if facts.dynamic or None in answers:
            return None
        return False

    def exported_models(self) -> frozenset[str]:
        """Class names the auto mappings name: what a catalogue package re-exports."""
        if self._exported is None:
            autos = [n for n in self.zip.members if n.startswith(AUTO_DIR) and n.endswith(".py")]
            texts = self.zip.read(autos)
            self._exported = frozenset(
                m.decode() for text in texts.values() for m in _CLASS_STRING.findall(text)
            )
        return self._exported

    def locate(self, module: str, name: str, missing: set[str], depth: int = 0) -> Located:
        """Where class ``name`` as seen from ``module`` is defined: ``(module, ClassFacts)``,
        a standard-library or built-in class, or None when the source cannot say. Modules
        not read yet are added to ``missing`` (and None returned) for the next round."""
        module = self.resolve(module)
        if depth > 12:
            return None
        if module.startswith(MODELS_PACKAGE):
            return None  # model-specific classes: their attributes are set per checkpoint
        if module not in self.facts:
            if module.partition(".")[0] == "transformers":
                missing.add(module)
                return None
            return _stdlib_class(module, name)
        facts = self.facts[module]
        if facts is None:
            return None
        if name in facts.classes:
            return (module, facts.classes[name])
        if name in facts.imported:
            source, original = facts.imported[name]
            return self.locate(source, original, missing, depth + 1)
        if name in facts.lazy:
            return self.locate(f"{module}.{facts.lazy[name]}", name, missing, depth + 1)
        if len(facts.stars) <= MAX_STARS:
            for star in facts.stars:
                if name in (self.facts.get(star) or ModuleFacts(frozenset())).names:
                    return self.locate(star, name, missing, depth + 1)
        return _stdlib_class("builtins", name)

    def _members(
        self, module: str, name: str, missing: set[str], depth: int = 0
    ) -> set[str] | None:
        found = self.locate(module, name, missing, depth)
        if found is None:
            return None
        if isinstance(found, type):
            return set(dir(found))
        where, cls = found
        out = set(cls.body if self.body_only else cls.members)
        for base in cls.bases:
            inherited = self._members(where, base, missing, depth + 1)
            if inherited is None:
                return None
            out |= inherited
        return out

    def members_of(
        self, classes: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], set[str] | None]:
        """Every name each class defines or inherits (None when a base cannot be read),
        reading the modules the walk reaches in batched rounds."""
        classes = list(dict.fromkeys(classes))
        result: dict[tuple[str, str], set[str] | None] = {}
        for _round in range(8):
            missing: set[str] = set()
            result = {c: self._members(*c, missing) for c in classes}
            if not missing:
                break
            self.load(missing)
        return result

    def has_member(self, module: str, cls: str, name: str) -> bool | None:
        """Whether class ``cls`` (as seen from ``module``) defines or inherits ``name``."""
        members = self.members_of([(module, cls)]).get((module, cls))
        return None if members is None else name in members

    def where(self, module: str, name: str) -> tuple[str, str] | None:
        """The module defining class ``name`` (as seen from ``module``), if already read."""
        found = self.locate(module, name, set())
        return (found[0], name) if isinstance(found, tuple) else None

    def names(self) -> set[str]:
        """Every name the modules read define, at module level or on a class."""
        out: set[str] = set()
        for facts in self.facts.values():
            if facts is not None:
                out.update(facts.names)
                out.update(facts.members)
        return out


def _facts(text: bytes, module: str, path: str) -> ModuleFacts | None:
    """The module's facts, its tree let go on return. One tree at a time across the threads
    a check reads its two releases in (a tree takes some fifty times its source's bytes
    while it is built, and the interpreter runs one thread at a time anyway)."""
    with _ONE_TREE:
        tree = apisurface.parse(text, path)
        if tree is None:
            return None
        return module_facts(tree, module, path.endswith("__init__.py"), text)


def _stdlib_class(module: str, name: str) -> type | None:
    """A class of the standard library (``collections.UserDict``) or a built-in one."""
    if module.partition(".")[0] not in sys.stdlib_module_names:
        return None
    try:
        found = getattr(importlib.import_module(module), name, None)
    except ImportError:
        return None
    return found if isinstance(found, type) else None
