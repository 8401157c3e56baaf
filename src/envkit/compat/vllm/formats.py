"""Code that runs only for checkpoints of one format: the tests vLLM makes of the file it is
given, and the lines under them.

A *format probe* is a vLLM function that tests a file suffix where it decides (an ``if`` or
a ``return`` comparing ``x.suffix == ".gguf"`` or calling ``x.endswith(".gguf")``). What it
probes is named from its own text: the suffix (``gguf checkpoint``), and a side file it
looks for by a pattern of that suffix (``"mmproj-*.gguf"``: ``gguf checkpoint with
mmproj``). A function that returns a probe's answer, or returns from under one, probes the
same. Probes are found in the file and in the vLLM modules it imports them from.

A line is under a probe when it sits in the body of an ``if`` whose test is a probe's call,
a name bound to one (``mmproj = detect_gguf_multimodal(model)``), ``x is not None`` of such
a name, or an ``and`` with one of these; or after ``if not <probe>: return`` in the same
block. Such a line runs only for checkpoints of that format (callers.py scopes by it).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Mapping

from envkit.compat.vllm.loading import absolute, module_of

Trees = Callable[[str], ast.Module | None]
Span = tuple[int, int, str]  # first line, last line, the condition
_SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,12}")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]{2,}")
_MARKS = (b"endswith(", b".suffix")


class Formats:
    """The format probes of vLLM's files and the lines under them (module docstring)."""

    def __init__(self, texts: Mapping[str, bytes], trees: Trees) -> None:
        self.texts, self.trees = texts, trees
        self.paths = {module_of(p): p for p in texts if p.startswith("vllm/") and p.endswith(".py")}
        self._probes: dict[str, dict[str, str]] = {}
        self._spans: dict[str, list[Span]] = {}

    def probes(self, path: str) -> dict[str, str]:
        """Function name -> what it probes, for those defined in ``path`` or imported into it
        from another vLLM module."""
        if path in self._probes:
            return self._probes[path]
        self._probes[path] = {}  # a cycle of imports sees nothing
        tree = self.trees(path) if path in self.texts else None
        if tree is None:
            return {}
        found: dict[str, str] = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                dots = "." * node.level + (node.module or "")
                other = self.paths.get(
                    absolute(module_of(path), path.endswith("__init__.py"), dots)
                )
                names = [
                    a for a in node.names if _defined(self.texts.get(other or "", b""), a.name)
                ]
                if other is None or not names:
                    continue
                theirs = self.probes(other)
                found.update(
                    {a.asname or a.name: theirs[a.name] for a in names if a.name in theirs}
                )
        if any(m in self.texts[path] for m in _MARKS) or found:
            functions = [
                n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            ]
            if any(m in self.texts[path] for m in _MARKS):
                found.update({fn.name: own for fn in functions if (own := _own_probe(fn))})
            for _ in range(3):  # probes returning probes, in any order of definition
                for fn in functions:
                    label = "" if fn.name in found else _derived(fn, found)
                    if label:
                        found[fn.name] = label
        self._probes[path] = found
        return found

    def conditions(self, path: str, line: int) -> tuple[str, ...]:
        """The checkpoint conditions line ``line`` of ``path`` runs under (none: any)."""
        if path not in self._spans:
            probes = self.probes(path)
            tree = self.trees(path) if probes else None
            spans: list[Span] = []
            if tree is not None:
                _walk(tree.body, probes, {}, spans)
            self._spans[path] = spans
        return tuple(sorted({c for a, b, c in self._spans[path] if a <= line <= b}))


def _defined(text: bytes, name: str) -> bool:
    """``text`` defines function ``name`` and tests a suffix somewhere."""
    return any(m in text for m in _MARKS) and f"def {name}(".encode() in text


def _own_probe(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """What ``fn`` probes when it tests a suffix where it decides ('' when it does not)."""
    suffix = next((found for node in _deciding(fn.body) if (found := _tested(node))), "")
    if not suffix:
        return ""
    words: list[str] = []
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            text = sub.value
            if text.endswith(suffix) and text != suffix and len(text) < 200:
                words.extend(w for w in _WORD.findall(text[: -len(suffix)]) if w not in words)
    name = f"{suffix[1:]} checkpoint"
    return f"{name} with {'/'.join(words)}" if words else name


def _deciding(body: list[ast.stmt]) -> Iterable[ast.expr]:
    """The tests of the ``if`` statements and the returned values of a function body."""
    stack = list(body)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, ast.If):
            yield stmt.test
            stack.extend(stmt.body + stmt.orelse)
        elif isinstance(stmt, ast.Return) and stmt.value is not None:
            yield stmt.value
        elif isinstance(stmt, (ast.Try, ast.With, ast.For, ast.While)):
            stack.extend(stmt.body)
            stack.extend(getattr(stmt, "orelse", []))
            for handler in getattr(stmt, "handlers", []):
                stack.extend(handler.body)


def _tested(node: ast.expr) -> str:
    """The suffix a test or returned value is decided by (through ``not``, ``and``, ``or``;
    not one a comprehension inside it filters by)."""
    if isinstance(node, ast.BoolOp):
        return next((found for v in node.values if (found := _tested(v))), "")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _tested(node.operand)
    return _suffix_test(node)


def _suffix_test(node: ast.AST) -> str:
    """``x.endswith(".gguf")`` or ``x.suffix == ".gguf"``: the suffix ('' otherwise)."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "endswith"
        and len(node.args) == 1
    ):
        return _suffix(node.args[0])
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq):
        sides = [node.left, node.comparators[0]]
        if any(isinstance(s, ast.Attribute) and s.attr == "suffix" for s in sides):
            return next((_suffix(s) for s in sides if _suffix(s)), "")
    return ""


def _suffix(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value if _SUFFIX.fullmatch(node.value) else ""
    return ""


def _derived(fn: ast.FunctionDef | ast.AsyncFunctionDef, probes: Mapping[str, str]) -> str:
    """What ``fn`` probes by answering with a probe: ``return probe(x)``, or ``if probe(x):
    return True``."""
    stack = list(fn.body)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            label = _probe_call(stmt.value, probes)
            if label:
                return label
        elif isinstance(stmt, ast.If):
            label = _probe_call(stmt.test, probes)
            if label and any(_returns_true(s) for s in stmt.body):
                return label
            stack.extend(stmt.orelse)
    return ""


def _returns_true(stmt: ast.stmt) -> bool:
    value = stmt.value if isinstance(stmt, ast.Return) else None
    return isinstance(value, ast.Constant) and value.value is True


def _probe_call(node: ast.expr, probes: Mapping[str, str]) -> str:
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else ""
        name = func.attr if isinstance(func, ast.Attribute) else name
        return probes.get(name, "")
    return ""


def _test(test: ast.expr, probes: Mapping[str, str], env: Mapping[str, str]) -> str:
    """What the test holds only for ('' when it is no probe of the checkpoint)."""
    if isinstance(test, ast.Name):
        return env.get(test.id, "")
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot):
        other = test.comparators[0]
        if isinstance(other, ast.Constant) and other.value is None:
            return _test(test.left, probes, env)
        return ""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return next((x for x in (_test(v, probes, env) for v in test.values) if x), "")
    return _probe_call(test, probes)


def _negated(test: ast.expr, probes: Mapping[str, str], env: Mapping[str, str]) -> str:
    """``not <probe>`` / ``x is None`` of a probe's answer: what the rest holds for."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _test(test.operand, probes, env)
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Is):
        other = test.comparators[0]
        if isinstance(other, ast.Constant) and other.value is None:
            return _test(test.left, probes, env)
    return ""


def _walk(
    body: list[ast.stmt], probes: Mapping[str, str], env: dict[str, str], out: list[Span]
) -> None:
    for index, stmt in enumerate(body):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target = stmt.targets[0]
            label = _probe_call(stmt.value, probes)
            if isinstance(target, ast.Name):
                if label:
                    env[target.id] = label
                else:
                    env.pop(target.id, None)
        if isinstance(stmt, ast.If):
            held = _test(stmt.test, probes, env)
            if held and stmt.body:
                out.append((stmt.body[0].lineno, _end(stmt.body[-1]), held))
            rest = _negated(stmt.test, probes, env)
            if rest and body[index + 1 :] and stmt.body and _exits(stmt.body[-1]):
                out.append((body[index + 1].lineno, _end(body[-1]), rest))
            _walk(stmt.body, probes, dict(env), out)
            _walk(stmt.orelse, probes, dict(env), out)
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            _walk(stmt.body, probes, {}, out)
            continue
        for block in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, block, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                _walk(inner, probes, env, out)
        for handler in getattr(stmt, "handlers", []):
            _walk(handler.body, probes, env, out)


def _exits(stmt: ast.stmt) -> bool:
    return isinstance(stmt, (ast.Return, ast.Raise, ast.Continue, ast.Break))


def _end(stmt: ast.stmt) -> int:
    return stmt.end_lineno or stmt.lineno
