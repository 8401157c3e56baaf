"""The names and modules a transformers release answers for others, read from its source.

transformers keeps old import paths working in three ways, each read here from the release's
own ``transformers/__init__.py`` and ``transformers/utils/import_utils.py`` (``ast``, never
run), so that what a release answers is not reported missing:

- **module aliases**: calls such as ``_create_module_alias(f"{__name__}.old", ".new")``, the
  same call in a loop over the package's files (``for f in (Path(__file__).parent /
  "models").rglob("image_processing_*.py")``, evaluated over the wheel's members), a table
  of old top-level names returned as ``f"{__name__}.{TABLE[name]}"``, and a compiled pattern
  whose match a resolver turns into the new path (``f"{__name__}.models.{match[1]}..."``);
- **name fallbacks**: a module ``__getattr__`` answering a name ending with a suffix by the
  name without its last characters (``if name.endswith("ImageProcessorFast"): ... name[:-4]``
  or ``name.removesuffix("Fast")``). Those of ``_LazyModule.__getattr__`` hold in every lazy
  package; the others in the alias modules.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from envkit import syntax

INIT = "transformers/__init__.py"
IMPORT_UTILS = "transformers/utils/import_utils.py"
_PACKAGE = "transformers"


@dataclass(frozen=True)
class AliasRules:
    modules: Mapping[str, str] = field(default_factory=dict)  # old module -> new module
    patterns: tuple[tuple[str, str], ...] = ()  # (regex over a module, its new path template)
    lazy: tuple[tuple[str, int], ...] = ()  # (suffix, characters dropped) in lazy packages
    aliased: tuple[tuple[str, int], ...] = ()  # the same, in alias modules

    def target(self, module: str) -> str | None:
        """The module ``module`` stands for, when it is an alias."""
        if module in self.modules:
            return self.modules[module]
        for pattern, template in self.patterns:
            found = re.fullmatch(pattern, module)
            if found is not None:
                return found.expand(template)
        return None

    def fallbacks(self, name: str, *, alias: bool) -> list[str]:
        """The shorter names that may answer ``name`` (in an alias module or a lazy one)."""
        rules = self.aliased if alias else self.lazy
        shorter = (n[:-d] for s, d in rules if (n := name).endswith(s) and d < len(n))
        return list(dict.fromkeys(shorter))


def read_rules(texts: Mapping[str, bytes], members: Iterable[str]) -> AliasRules:
    """The rules of one release from its ``__init__`` and ``import_utils`` sources."""
    names = list(members)
    modules: dict[str, str] = {}
    patterns: list[tuple[str, str]] = []
    lazy: set[tuple[str, int]] = set()
    aliased: set[tuple[str, int]] = set()
    for path in (INIT, IMPORT_UTILS):
        tree = _parse(texts.get(path))
        if tree is None:
            continue
        env = _module_strings(tree)
        if path == INIT:
            _loops(tree, env, names, modules)
            modules.update(_calls(tree.body, env))
            patterns.extend(_patterns(tree, env))
            modules.update(_tables(tree, env))
        for cls, function in _functions(tree):
            rules = _suffix_rules(function)
            if cls == "_LazyModule" and function.name == "__getattr__":
                lazy.update(rules)
            elif function.name in ("__getattr__", "_getattr"):
                aliased.update(rules)
    return AliasRules(modules, tuple(patterns), tuple(sorted(lazy)), tuple(sorted(aliased)))


def _parse(data: bytes | None) -> ast.Module | None:
    if data is None:
        return None
    try:
        return syntax.parse_module(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _module_strings(tree: ast.Module) -> dict[str, object]:
    """Module-level names bound to strings, string tables and compiled patterns."""
    env: dict[str, object] = {"__name__": _PACKAGE}
    for node in _top(tree.body):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                value = _value(node.value, env)
                if value is not None:
                    env[target.id] = value
    return env


def _top(body: Iterable[ast.stmt]) -> Iterable[ast.stmt]:
    """Statements at module level, inside if/else/try blocks too (not inside functions)."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try)):
            yield from _top([*node.body, *node.orelse, *getattr(node, "finalbody", [])])


@dataclass(frozen=True)
class _Pattern:
    regex: str


@dataclass(frozen=True)
class _File:
    path: str  # a wheel member, transformers/models/x/image_processing_x.py


def _value(node: ast.expr, env: Mapping[str, object]) -> object:
    """A string, a table of strings, a compiled pattern or a file, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.JoinedStr):
        return _joined(node, env)
    if isinstance(node, ast.Dict):
        pairs = [
            (_value(k, env) if k else None, _value(v, env))
            for k, v in zip(node.keys, node.values, strict=True)
        ]
        if all(isinstance(k, str) and isinstance(v, str) for k, v in pairs):
            return dict(pairs)
        return None
    if isinstance(node, ast.Attribute):
        owner = _value(node.value, env)
        if isinstance(owner, _File):
            return _path_part(owner.path, node.attr)
        return None
    if isinstance(node, ast.Call):
        called = getattr(node.func, "attr", getattr(node.func, "id", ""))
        inner = _value(node.args[0], env) if node.args else None
        if called == "compile" and isinstance(inner, str):
            return _Pattern(inner)
        if called == "escape" and isinstance(inner, str):
            return re.escape(inner)
    return None


def _path_part(path: str, attr: str) -> object:
    folder, _slash, name = path.rpartition("/")
    if attr == "stem":
        return name.rpartition(".")[0] or name
    if attr == "name":
        return name
    if attr == "parent":
        return _File(folder)
    return None


def _joined(node: ast.JoinedStr, env: Mapping[str, object]) -> str | None:
    out = []
    for part in node.values:
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            out.append(part.value)
            continue
        if not isinstance(part, ast.FormattedValue):
            return None
        inner = part.value
        if (
            isinstance(inner, ast.Subscript)
            and isinstance(inner.value, ast.Name)
            and inner.value.id == "match"
            and isinstance(inner.slice, ast.Constant)
            and isinstance(inner.slice.value, int)
        ):
            out.append(f"\\g<{inner.slice.value}>")  # a group of the resolver's match
            continue
        value = _value(inner, env)
        if not isinstance(value, str):
            return None
        out.append(value)
    return "".join(out)


def _absolute(target: str) -> str:
    return f"{_PACKAGE}{target}" if target.startswith(".") else target


def _calls(body: Iterable[ast.stmt], env: Mapping[str, object]) -> dict[str, str]:
    """``*alias*(old, new)`` calls whose arguments evaluate to strings."""
    out: dict[str, str] = {}
    for node in _top(body):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            called = getattr(call.func, "id", getattr(call.func, "attr", ""))
            if "alias" in called.lower() and len(call.args) >= 2:
                old, new = _value(call.args[0], env), _value(call.args[1], env)
                if isinstance(old, str) and isinstance(new, str) and "\\g<" not in old + new:
                    out[old] = _absolute(new)
    return out


def _loops(
    tree: ast.Module, env: Mapping[str, object], members: list[str], out: dict[str, str]
) -> None:
    """``for f in (Path(__file__).parent / "models").rglob("glob"):`` with alias calls."""
    for node in _top(tree.body):
        if not (isinstance(node, ast.For) and isinstance(node.target, ast.Name)):
            continue
        found = _glob(node.iter)
        if found is None:
            continue
        folder, pattern, recursive = found
        for member in members:
            rest = member[len(folder) + 1 :] if member.startswith(folder + "/") else ""
            if not rest or (not recursive and "/" in rest):
                continue
            if fnmatch.fnmatchcase(rest.rpartition("/")[2], pattern):
                local = dict(env)
                local[node.target.id] = _File(member)
                for stmt in node.body:
                    if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
                        local[stmt.targets[0].id] = _value(stmt.value, local)
                out.update(_calls(node.body, local))


def _glob(node: ast.expr) -> tuple[str, str, bool] | None:
    """``(folder, pattern, recursive)`` of ``sorted((Path(__file__).parent / "x").rglob(p))``."""
    while isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("sorted", "list"):
        if not node.args:
            return None
        node = node.args[0]
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return None
    method = node.func.attr
    arg = node.args[0] if node.args else None
    if method not in ("glob", "rglob") or not (
        isinstance(arg, ast.Constant) and isinstance(arg.value, str)
    ):
        return None
    folder = _folder(node.func.value)
    return (folder, arg.value, method == "rglob") if folder else None


def _folder(node: ast.expr) -> str:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        base = _folder(node.left)
        right = node.right
        if base and isinstance(right, ast.Constant) and isinstance(right.value, str):
            return f"{base}/{right.value}"
        return ""
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        inner = node.value
        if isinstance(inner, ast.Call) and getattr(inner.func, "id", "") == "Path" and inner.args:
            arg = inner.args[0]
            if isinstance(arg, ast.Name) and arg.id == "__file__":
                return _PACKAGE  # the package's own folder
    return ""


def _patterns(tree: ast.Module, env: Mapping[str, object]) -> list[tuple[str, str]]:
    """A resolver ``if (match := PATTERN.fullmatch(x)): return f"..."`` over a compiled pattern."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        pattern = next(
            (
                env.get(sub.func.value.id)
                for sub in ast.walk(node.test)
                if isinstance(sub, ast.Call)
                and isinstance(sub.func, ast.Attribute)
                and sub.func.attr in ("fullmatch", "match")
                and isinstance(sub.func.value, ast.Name)
            ),
            None,
        )
        returned = next((s.value for s in node.body if isinstance(s, ast.Return) and s.value), None)
        if isinstance(pattern, _Pattern) and isinstance(returned, ast.JoinedStr):
            template = _joined(returned, env)
            if template:
                out.append((pattern.regex, template))
    return out


def _tables(tree: ast.Module, env: Mapping[str, object]) -> dict[str, str]:
    """``return f"{__name__}.{TABLE[name]}"``: every old name of TABLE is an alias."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Return) and isinstance(node.value, ast.JoinedStr)):
            continue
        parts = node.value.values
        subscripts = [
            p.value
            for p in parts
            if isinstance(p, ast.FormattedValue) and isinstance(p.value, ast.Subscript)
        ]
        if len(subscripts) != 1 or not isinstance(subscripts[0].value, ast.Name):
            continue
        table = env.get(subscripts[0].value.id)
        prefix = parts[0]
        if not isinstance(table, dict) or not (
            isinstance(prefix, ast.FormattedValue)
            and isinstance(prefix.value, ast.Name)
            and prefix.value.id == "__name__"
        ):
            continue
        for old, new in table.items():
            out[f"{_PACKAGE}.{old}"] = f"{_PACKAGE}.{new}"
    return out


def _functions(tree: ast.Module) -> Iterable[tuple[str, ast.FunctionDef]]:
    """Every function with the class it is a method of ('' for others)."""
    classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    owned = {id(f): c.name for c in classes for f in c.body if isinstance(f, ast.FunctionDef)}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            yield owned.get(id(node), ""), node


def _suffix_rules(function: ast.FunctionDef) -> set[tuple[str, int]]:
    """(suffix, characters dropped) of ``if x.endswith(S): ... x[:-K]`` and
    ``x.removesuffix(S)`` in a function."""
    rules: set[tuple[str, int]] = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            arg = node.args[0] if node.args else None
            if (
                node.func.attr == "removesuffix"
                and isinstance(arg, ast.Constant)
                and isinstance(arg.value, str)
            ):
                rules.add((arg.value, len(arg.value)))
        if isinstance(node, (ast.If, ast.IfExp)):
            suffixes = _endswith(node.test)
            body = node.body if isinstance(node.body, list) else [node.body]
            for var, drop in _drops([node.test, *body]):
                rules.update((s, drop) for v, s in suffixes if v == var and drop < len(s))
    return rules


def _endswith(test: ast.expr) -> list[tuple[str, str]]:
    """(variable, suffix) of each ``variable.endswith("suffix")`` in a test."""
    return [
        (getattr(sub.func.value, "id", ""), sub.args[0].value)
        for sub in ast.walk(test)
        if isinstance(sub, ast.Call)
        and isinstance(sub.func, ast.Attribute)
        and sub.func.attr == "endswith"
        and sub.args
        and isinstance(sub.args[0], ast.Constant)
        and isinstance(sub.args[0].value, str)
    ]


def _drops(nodes: Iterable[ast.AST]) -> set[tuple[str, int]]:
    """(x, K) of every ``x[:-K]`` in the nodes, but not inside a nested ``endswith`` test's
    own branch (its rule is its own)."""
    out = set()
    stack = list(nodes)
    while stack:
        sub = stack.pop()
        if isinstance(sub, (ast.If, ast.IfExp)) and _endswith(sub.test):
            continue
        if isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Slice):
            upper = sub.slice.upper
            if (
                sub.slice.lower is None
                and isinstance(upper, ast.UnaryOp)
                and isinstance(upper.op, ast.USub)
                and isinstance(upper.operand, ast.Constant)
                and isinstance(upper.operand.value, int)
            ):
                out.add((getattr(sub.value, "id", ""), upper.operand.value))
        stack.extend(ast.iter_child_nodes(sub))
    return out


def literal_alias(call: ast.Call, module: str, is_package: bool) -> tuple[str, str] | None:
    """``make_alias(f"{__name__}.old", ".new")``: the module ``old`` stands for ``new``."""
    called = getattr(call.func, "id", getattr(call.func, "attr", ""))
    if "alias" not in called.lower() or len(call.args) < 2:
        return None
    first, second = call.args[0], call.args[1]
    old = _last_part(first)
    if not old or not (isinstance(second, ast.Constant) and isinstance(second.value, str)):
        return None
    target = second.value
    package = module if is_package else module.rpartition(".")[0]
    new = f"{package}{target}" if target.startswith(".") else target
    return (f"{package}.{old}", new)


def _last_part(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
    elif isinstance(node, ast.JoinedStr) and node.values:
        tail = node.values[-1]
        text = tail.value if isinstance(tail, ast.Constant) and isinstance(tail.value, str) else ""
    else:
        return ""
    part = text.rpartition(".")[2]
    return part if part.isidentifier() else ""
