"""What a transformers module provides, read from its source with ``ast`` (never imported).

:func:`module_facts` gives a module's top-level names (with ``__all__`` and a lazy
``_import_structure``), its ``from .x import *`` re-exports, module aliases, a module
``__getattr__`` (defined, or assigned from a helper such as ``deprecate_attr(__name__,
rename={...})``, whose tables' keys it answers) or ``_LazyModule``, and its classes' names
(:class:`ClassFacts`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from envkit.compat.apisurface import class_body, instance_attributes, target_names
from envkit.compat.transformers.tfaliases import literal_alias


@dataclass(frozen=True)
class ClassFacts:
    bases: tuple[str, ...]  # base classes by the name the module knows them
    body: frozenset[str]  # methods, properties, class attributes
    assigned: frozenset[str] = frozenset()  # self.x = ... in its methods
    # with a __getattr__ or setattr(self, computed, ...): the names it may answer or set
    # (the class's strings, and x_id / x_ids)
    dynamic: frozenset[str] = frozenset()

    @property
    def members(self) -> frozenset[str]:
        return self.body | self.assigned | self.dynamic


@dataclass(frozen=True)
class ModuleFacts:
    names: frozenset[str]
    stars: tuple[str, ...] = ()  # absolute modules re-exported with ``from .x import *``
    aliases: tuple[tuple[str, str], ...] = ()  # (module, the module it stands for)
    dynamic: bool = False  # a module-level __getattr__ (def or assigned): any name may exist
    scans_folder: bool = False  # define_import_structure(_file): every sibling's __all__
    lazy_module: bool = False  # sys.modules[__name__] = _LazyModule(...): its __getattr__ answers
    classes: Mapping[str, ClassFacts] = field(default_factory=dict)
    imported: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # as -> (module, name)
    lazy: Mapping[str, str] = field(default_factory=dict)  # name -> submodule (_import_structure)

    @property
    def members(self) -> frozenset[str]:
        return frozenset(m for c in self.classes.values() for m in c.members)


def resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute module of a relative import inside ``module``."""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join([*parts, name] if name else parts)


def is_placeholder(module: str) -> bool:
    """``transformers.utils.dummy_pt_objects`` and its kind: modules transformers generates
    to import in place of a backend that is missing, each name a placeholder that raises on
    use. Their star imports are not followed: with torch installed (as with every vLLM) the
    torch ones are never imported, and a name only a placeholder gives is no class to use."""
    return module.partition(".utils.dummy_")[2].endswith("_objects")


def _module_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """Top-level statements, looking into if/try/with blocks but not into functions."""
    stack: list[ast.stmt] = list(reversed(tree.body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            inner: list[ast.stmt] = list(node.body)
            for field in ("orelse", "finalbody"):
                inner.extend(getattr(node, field, []))
            for handler in getattr(node, "handlers", []):
                inner.extend(handler.body)
            stack.extend(reversed(inner))


class _Collector:
    """What :func:`module_facts` gathers, one kind of top-level statement at a time."""

    def __init__(self, module: str, is_package: bool, text: bytes | None = None) -> None:
        self.module, self.is_package = module, is_package
        # the source's lines, to look for ``setattr`` in a class's own lines before walking
        # its tree for the call (None: walk every class)
        self.lines = text.split(b"\n") if text is not None and b"\r" not in text else None
        # a module whose source never names the call cannot make it (None: walk to see)
        self.may_scan = text is None or b"define_import_structure" in text
        self.names: set[str] = set()
        self.stars: list[str] = []
        self.aliases: list[tuple[str, str]] = []
        self.dynamic = self.scans = self.lazy_module = False
        self.classes: dict[str, ClassFacts] = {}
        self.imported: dict[str, tuple[str, str]] = {}
        self.lazy: dict[str, str] = {}

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.names.add(node.name)
            self.dynamic = self.dynamic or node.name == "__getattr__"
        elif isinstance(node, ast.ClassDef):
            self.names.add(node.name)
            self.classes[node.name] = _class_facts(node, self._names_setattr(node))
        elif isinstance(node, ast.ImportFrom):
            self.import_from(node)
        elif isinstance(node, ast.Import):
            self.names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            self.assignment(node)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            self.call(node.value)
        self.scans = self.scans or (self.may_scan and _scans_folder(node))
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            self.lazy_module = self.lazy_module or _called(node.value) == "_LazyModule"

    def _names_setattr(self, node: ast.ClassDef) -> bool:
        """Whether the class's lines (its decorators' included) hold ``setattr``."""
        if self.lines is None:
            return True
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        last = node.end_lineno or len(self.lines)
        return any(b"setattr" in line for line in self.lines[first - 1 : last])

    def import_from(self, node: ast.ImportFrom) -> None:
        source = node.module or ""
        if node.level:
            source = resolve(self.module, self.is_package, node.level, node.module)
            if any(a.name == "*" for a in node.names) and not is_placeholder(source):
                self.stars.append(source)
        for a in node.names:
            if a.name != "*":
                self.names.add(a.asname or a.name)
                self.imported[a.asname or a.name] = (source, a.name)

    def assignment(self, node: ast.Assign | ast.AnnAssign | ast.AugAssign) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        found = target_names(targets)
        self.names.update(found)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name):
            # Old = New: the old name stands for the same class
            self.imported.update(dict.fromkeys(found, (self.module, node.value.id)))
        if "__getattr__" in found and node.value is not None:
            # __getattr__ = deprecate_attr(__name__, rename={"Old": ...}): a module
            # __getattr__ all the same, answering the keys of the tables it is made from
            self.dynamic = True
            self.names.update(
                k.value
                for d in ast.walk(node.value)
                if isinstance(d, ast.Dict)
                for k in d.keys
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            )
        if found & {"__all__", "_import_structure"} or _mentions(targets, "_import_structure"):
            self.names.update(_strings(node.value))
            self.lazy.update(_lazy_table(targets, node.value))

    def call(self, call: ast.Call) -> None:
        if _mentions([call.func], "_import_structure") or _mentions([call.func], "__all__"):
            self.names.update(_strings(call))
            self.lazy.update(_lazy_table([call.func], call))
        alias = literal_alias(call, self.module, self.is_package)
        if alias:
            self.aliases.append(alias)

    def facts(self) -> ModuleFacts:
        return ModuleFacts(
            frozenset(self.names),
            tuple(self.stars),
            tuple(self.aliases),
            self.dynamic,
            self.scans,
            self.lazy_module,
            self.classes,
            self.imported,
            self.lazy,
        )


def module_facts(
    tree: ast.Module, module: str, is_package: bool, text: bytes | None = None
) -> ModuleFacts:
    """What ``module`` (parsed as ``tree``) provides; see :class:`ModuleFacts`. ``text``,
    the source parsed, spares walking each class for a ``setattr`` call it cannot hold."""
    collector = _Collector(module, is_package, text)
    for node in _module_level(tree):
        collector.statement(node)
    return collector.facts()


def _class_facts(node: ast.ClassDef, setattr_possible: bool = True) -> ClassFacts:
    """``setattr_possible``: the class's source names ``setattr`` (else it calls none, and
    its tree is not walked for one)."""
    bases = tuple(_dotted(b) for b in node.bases if _dotted(b))
    body = class_body(node)
    dynamic = "__getattr__" in body or (setattr_possible and _sets_named_attributes(node))
    answers = (
        frozenset(f"{text}{suffix}" for text in _strings(node) for suffix in ("", "_id", "_ids"))
        if dynamic
        else frozenset()
    )  # the strings of a class with no __getattr__ nor computed setattr: never needed
    return ClassFacts(bases, frozenset(body), frozenset(instance_attributes(node)), answers)


def _sets_named_attributes(node: ast.ClassDef) -> bool:
    """``setattr(self, name, ...)`` with a computed name: the class's attributes come from
    data (a processor's ``attributes = ["tokenizer", ...]``), not from its source."""
    return any(
        isinstance(sub, ast.Call)
        and _called(sub) == "setattr"
        and len(sub.args) >= 2
        and isinstance(sub.args[0], ast.Name)
        and sub.args[0].id == "self"
        and not isinstance(sub.args[1], ast.Constant)
        for sub in ast.walk(node)
    )


def _scans_folder(node: ast.stmt) -> bool:
    """``define_import_structure(_file)``: the package exports its modules' ``__all__``."""
    if not isinstance(node, (ast.Assign, ast.Expr)):
        return False
    for sub in ast.walk(node.value):
        if isinstance(sub, ast.Call) and _called(sub) == "define_import_structure":
            first = sub.args[0] if sub.args else None
            return isinstance(first, ast.Name) and first.id == "_file"
    return False


def _called(call: ast.Call) -> str:
    return call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", "")


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr  # module.Class: the class name; its module is looked up by name
    return ""


def _lazy_table(targets: Iterable[ast.AST], value: ast.AST | None) -> dict[str, str]:
    """name -> submodule from ``_import_structure = {"sub": ["Name"]}`` and
    ``_import_structure["sub"] = [...]`` / ``_import_structure["sub"].extend([...])``."""
    out: dict[str, str] = {}
    if isinstance(value, ast.Dict):
        for key, item in zip(value.keys, value.values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                out.update(dict.fromkeys(_strings(item), key.value))
        return out
    for target in targets:
        for sub in ast.walk(target):
            if (
                isinstance(sub, ast.Subscript)
                and isinstance(sub.slice, ast.Constant)
                and isinstance(sub.slice.value, str)
            ):
                out.update(dict.fromkeys(_strings(value), sub.slice.value))
                return out
    return out


def _mentions(nodes: Iterable[ast.AST | None], name: str) -> bool:
    return any(
        isinstance(sub, ast.Name) and sub.id == name
        for node in nodes
        if node is not None
        for sub in ast.walk(node)
    )


def _strings(node: ast.AST | None) -> set[str]:
    if node is None:
        return set()
    return {
        sub.value
        for sub in ast.walk(node)
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value.isidentifier()
    }
