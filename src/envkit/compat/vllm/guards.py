"""Which lines of a vLLM file cannot run with a given transformers release.

vLLM keeps code for several transformers generations side by side, behind conditions on the
installed release:

- the version itself: ``if Version(transformers.__version__) >= Version("5.0.0"):``, through
  ``importlib.metadata.version("transformers")`` or ``from transformers import __version__``;
- a module-level flag computed from it (``TRANSFORMERS_WITH_AXIAL_ROPE = Version(...) >=
  ...``), in the same file or imported from another vLLM module;
- probes: ``hasattr(transformers_thing, "name")`` (a module, a class imported from
  transformers, or ``self`` in a class deriving from one) and
  ``importlib.util.find_spec("transformers.x")``;
- a helper that raises below a version (``self.check_version("5.2.0", ...)``), after which
  the rest of the block runs only on that version or newer; an ``if`` whose taken branch
  returns or raises ends its block the same way;
- a module-level ``if <true for the release>: raise ...`` (vLLM 0.24's "Support for
  Transformers v4 ... was removed"): importing the module raises, listed in ``refusals``;
- a fallback import: ``try: from transformers.x import New`` ``except ImportError: from
  transformers.x import Old as New``. The handlers run only when the ``try`` body raises:
  when the release provides everything that body imports (and the body does nothing else
  that could raise), they cannot run.

Each condition is evaluated for the target release (three-valued: what cannot be told keeps
both branches). :func:`dead_lines` returns the line ranges that cannot run, so a finding
there raises nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from envkit.compat.vllm.conditions import (
    COMPARE,
    INSTALLED,
    VERSION_CALLS,
    Conditions,
    Flags,
    Probe,
    Value,
    called_name,
)


@dataclass(frozen=True)
class _Helper:
    """A function raising unless the installed release compares ``op`` to its argument."""

    position: int  # which positional argument is the version (self not counted)
    op: type[ast.cmpop]  # the comparison under which it raises


class Guards(Conditions):
    """The guards of one parsed vLLM file, evaluated for one transformers release."""

    def __init__(self, tree: ast.Module, probe: Probe, flags: Flags = lambda _m: {}) -> None:
        super().__init__(tree, probe, flags)
        self.helpers: dict[str, _Helper] = {}
        self.dead: list[tuple[int, int]] = []
        self.only: list[tuple[int, int, tuple[str, ...]]] = []  # lines run for these types only
        self.refusals: list[tuple[int, str]] = []  # (line, message) of import-time raises

    def dead_lines(self) -> list[tuple[int, int]]:
        """The line ranges that cannot run (and, in ``only``, those that run only for some
        model types: under ``if model_type in {"a", "b"}`` or ``== "a"``)."""
        self._bind_module(self.tree.body)
        self._find_helpers(self.tree)
        self._block(self.tree.body, dict(self.env))
        self._refusals(self.tree.body)
        return self.dead

    def _refusals(self, body: list[ast.stmt]) -> None:
        """Module-level ``if`` blocks that the release takes and that end in a raise."""
        for stmt in body:
            if not isinstance(stmt, ast.If) or self.truth(stmt.test, self.env) is not True:
                continue
            last = stmt.body[-1]
            if isinstance(last, ast.Raise) and not within(self.dead, last.lineno):
                self.refusals.append((last.lineno, _message(last)))
            else:
                self._refusals(stmt.body)

    # -- what names stand for

    def _find_helpers(self, tree: ast.Module) -> None:
        """Classes and version helpers, from the statements alone (expressions are not
        entered: walking every node of a large file costs more than all the rest)."""
        stack: list[ast.stmt] = list(tree.body)
        while stack:
            node = stack.pop()
            if isinstance(node, ast.ClassDef):
                self.classes.append(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                helper = self._helper(node)
                if helper is not None:
                    self.helpers[node.name] = helper
            for block in _inner_blocks(node):
                stack.extend(block)
        self.classes.sort(key=lambda c: c.lineno)

    def _helper(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> _Helper | None:
        params = [a.arg for a in node.args.args]
        if params[:1] in (["self"], ["cls"]) and not _is_static(node):
            params = params[1:]
        local: dict[str, Value] = dict(self.env)
        marked: dict[str, Value] = {p: ("param", p) for p in params}
        for stmt in node.body:
            if isinstance(stmt, ast.Assign):
                self._assign_marked(stmt, local, marked)
            elif isinstance(stmt, ast.If) and stmt.body and _ends(stmt.body[-1:], raises=True):
                found = self._param_compare(stmt.test, local, marked, params)
                if found is not None:
                    return found
        return None

    def _assign_marked(
        self, stmt: ast.Assign, local: dict[str, Value], marked: dict[str, Value]
    ) -> None:
        if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
            return
        value = stmt.value
        if isinstance(value, ast.Call) and called_name(value) in VERSION_CALLS and value.args:
            arg = value.args[0]
            if isinstance(arg, ast.Name) and arg.id in marked:
                marked[stmt.targets[0].id] = marked[arg.id]
                return
        self._assign(stmt, local)

    def _param_compare(
        self,
        test: ast.expr,
        local: Mapping[str, Value],
        marked: Mapping[str, Value],
        params: list[str],
    ) -> _Helper | None:
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
            return None
        sides = [test.left, test.comparators[0]]
        kinds = [self._side(s, local, marked) for s in sides]
        op = test.ops[0]
        if type(op) not in COMPARE:
            return None
        if kinds[0] is INSTALLED and isinstance(kinds[1], tuple):
            return _Helper(params.index(str(kinds[1][1])), type(op))
        if kinds[1] is INSTALLED and isinstance(kinds[0], tuple):
            return _Helper(params.index(str(kinds[0][1])), _MIRROR[type(op)])
        return None

    def _side(
        self, node: ast.expr, local: Mapping[str, Value], marked: Mapping[str, Value]
    ) -> Value:
        if isinstance(node, ast.Name) and node.id in marked:
            return marked[node.id]
        if isinstance(node, ast.Call) and called_name(node) in VERSION_CALLS and node.args:
            inner = node.args[0]
            if isinstance(inner, ast.Name) and inner.id in marked:
                return marked[inner.id]
        return self.value(node, local)

    def _raises(self, stmt: ast.stmt, env: Mapping[str, Value]) -> bool:
        """A call of a version helper that raises for the target release."""
        if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
            return False
        helper = self.helpers.get(called_name(stmt.value))
        if helper is None or helper.position >= len(stmt.value.args):
            return False
        arg = self.value(stmt.value.args[helper.position], env)
        try:
            wanted = Version(arg) if isinstance(arg, str) else None
        except InvalidVersion:
            return False
        return wanted is not None and COMPARE[helper.op](self.probe.version, wanted)

    # -- the walk

    def _block(self, body: list[ast.stmt], env: dict[str, Value]) -> None:
        for index, stmt in enumerate(body):
            if isinstance(stmt, ast.Assign):
                self._assign(stmt, env)
            if self._raises(stmt, env):
                self._kill(body[index + 1 :])
                return
            self._fallbacks(stmt)
            if isinstance(stmt, ast.If):
                types = self._model_types(stmt.test, env)
                if types and stmt.body:
                    last = stmt.body[-1]
                    self.only.append((stmt.body[0].lineno, last.end_lineno or last.lineno, types))
                verdict = self.truth(stmt.test, env)
                if verdict is True:
                    self._kill(stmt.orelse)
                    self._block(stmt.body, dict(env))
                    if _ends(stmt.body):
                        self._kill(body[index + 1 :])
                        return
                    continue
                if verdict is False:
                    self._kill(stmt.body)
                    self._block(stmt.orelse, dict(env))
                    if stmt.orelse and _ends(stmt.orelse):
                        self._kill(body[index + 1 :])
                        return
                    continue
            for inner in _inner_blocks(stmt):
                self._block(inner, dict(env))

    def _fallbacks(self, stmt: ast.stmt) -> None:
        """A ``try`` whose body cannot raise: its handlers cannot run."""
        if isinstance(stmt, ast.Try) and self._cannot_raise(stmt.body):
            for handler in stmt.handlers:
                self._kill(handler.body)

    def _cannot_raise(self, body: list[ast.stmt]) -> bool:
        """Every statement is an import of transformers that the release answers, or one
        that cannot raise (``pass``, a docstring, a name bound to a constant)."""
        for stmt in body:
            if isinstance(stmt, ast.ImportFrom):
                module = stmt.module or ""
                if stmt.level or module.split(".")[0] != "transformers":
                    return False
                if self.probe.module_exists(module) is not True:
                    return False
                names = [a.name for a in stmt.names if a.name != "*"]
                if any(self.probe.provides(module, n) is not True for n in names):
                    return False
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.name.split(".")[0] != "transformers":
                        return False
                    if self.probe.module_exists(alias.name) is not True:
                        return False
            elif not _harmless(stmt):
                return False
        return bool(body)

    def _model_types(self, test: ast.expr, env: Mapping[str, Value]) -> tuple[str, ...]:
        """``model_type in {"a", "b"}`` / ``x.model_type == "a"``: the model types it runs for."""
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
            return ()
        left = test.left
        named = left.id if isinstance(left, ast.Name) else getattr(left, "attr", "")
        if "model_type" not in named or not isinstance(test.ops[0], (ast.In, ast.Eq)):
            return ()
        value = self.value(test.comparators[0], env)
        if isinstance(value, str):
            return (value,)
        if isinstance(value, frozenset):
            return tuple(sorted(str(v) for v in value))
        return ()

    def _kill(self, body: list[ast.stmt]) -> None:
        if body:
            self.dead.append((body[0].lineno, body[-1].end_lineno or body[-1].lineno))


_MIRROR: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE, ast.Eq: ast.Eq,
    ast.NotEq: ast.NotEq,
}  # fmt: skip


def _is_static(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)


def _ends(body: list[ast.stmt], *, raises: bool = False) -> bool:
    """The block always leaves (its last statement returns or raises)."""
    if not body:
        return False
    last = body[-1]
    return isinstance(last, ast.Raise) or (
        not raises and isinstance(last, (ast.Return, ast.Continue, ast.Break))
    )


def _message(node: ast.Raise) -> str:
    """The first string a raise gives its exception (implicit concatenation joined)."""
    call = node.exc
    if isinstance(call, ast.Call) and call.args:
        first = call.args[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value
    return ""


def _harmless(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Pass):
        return True
    if isinstance(stmt, ast.Expr):
        return isinstance(stmt.value, ast.Constant)
    if isinstance(stmt, ast.Assign):
        simple = all(isinstance(t, ast.Name) for t in stmt.targets)
        return simple and isinstance(stmt.value, ast.Constant)
    return False


def _inner_blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    out = [getattr(stmt, name, None) for name in ("body", "orelse", "finalbody")]
    blocks = [b for b in out if isinstance(b, list) and b and isinstance(b[0], ast.stmt)]
    for handler in getattr(stmt, "handlers", ()) or ():
        blocks.append(handler.body)
    if isinstance(stmt, ast.Match):
        blocks.extend(case.body for case in stmt.cases)
    return blocks


def dead_lines(
    tree: ast.Module, probe: Probe, flags: Flags = lambda _m: {}
) -> list[tuple[int, int]]:
    """The line ranges of ``tree`` that cannot run with the probed release."""
    return Guards(tree, probe, flags).dead_lines()


def within(ranges: Iterable[tuple[int, int]], line: int) -> bool:
    return any(a <= line <= b for a, b in ranges)
