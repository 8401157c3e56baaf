"""Adversarial lines for a regular expression, built from the pattern's own pieces: its
literal runs and one character of each class it uses. The shapes that make a backtracking
engine slow are runs of what one quantifier takes and a match never completes (``A.*B``
against ``AAAA...``, ``\\w*Tokenizer`` against ``TokenizerTokenizer...``, ``\\d+%`` against
``0000...``, ``[A-Z]*_[A-Z]+=`` against ``A____...``); each line below is one such shape at
``size`` characters.
"""

from __future__ import annotations

import importlib
import itertools
import re
import time
from collections.abc import Iterator
from typing import Any

try:  # 3.11+
    import re._parser as sre  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # pragma: no cover
    import sre_parse as sre  # type: ignore[no-redef,unused-ignore]

_CATEGORY = {
    "CATEGORY_DIGIT": "0",
    "CATEGORY_NOT_DIGIT": "a",
    "CATEGORY_SPACE": " ",
    "CATEGORY_NOT_SPACE": "a",
    "CATEGORY_WORD": "a_0",
    "CATEGORY_NOT_WORD": " .",
}
_OUTSIDE = "a (.-_/'\"=:"  # tried for a negated class: those the class does not hold


def _set_chars(items: list[tuple[Any, Any]], negated: bool) -> str:
    held = ""
    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            held += chr(av)
        elif name == "RANGE":
            held += chr(av[0]) + chr(av[1])
        elif name == "CATEGORY":
            held += _CATEGORY.get(str(av), "")
    if negated:
        outside = [c for c in _OUTSIDE if not re.fullmatch(f"[{re.escape(held)}]", c)]
        return "".join(outside[:2])
    return held


class _Pieces:
    def __init__(self) -> None:
        self.literals: list[str] = []
        self.chars: set[str] = set()
        self._run = ""

    def end_run(self) -> None:
        if self._run:
            self.literals.append(self._run)
        self._run = ""

    def walk(self, parsed: Any) -> None:
        for op, av in parsed:
            name = str(op)
            if name == "LITERAL":
                self._run += chr(av)
                continue
            self.end_run()
            if name == "NOT_LITERAL":
                self.chars.add("a" if chr(av) != "a" else "b")
            elif name == "IN":
                negated = bool(av) and str(av[0][0]) == "NEGATE"
                self.chars.update(_set_chars(av[1:] if negated else av, negated))
            elif name == "ANY":
                self.chars.add("a")
            elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                self.walk(av[2])
            elif name == "SUBPATTERN":
                self.walk(av[-1])
            elif name in ("ASSERT", "ASSERT_NOT"):
                self.walk(av[1])
            elif name == "BRANCH":
                for branch in av[1]:
                    self.walk(branch)
                    self.end_run()
            elif name == "CATEGORY":
                self.chars.update(_CATEGORY.get(str(av), ""))
        self.end_run()


def pieces(pattern: re.Pattern[str]) -> tuple[list[str], list[str]]:
    """(literal runs, one character of each class) of the pattern, each once, in a stable order."""
    found = _Pieces()
    found.walk(sre.parse(pattern.pattern, pattern.flags))
    literals = list(dict.fromkeys(x for x in found.literals if x))
    return literals, sorted(found.chars)


def lines(pattern: re.Pattern[str], size: int) -> Iterator[str]:
    """Lines of about ``size`` characters that drive each quantifier of the pattern to the
    end of the line with no match at the end of it."""
    literals, chars = pieces(pattern)
    seen: set[str] = set()

    def fill(unit: str) -> str:
        return unit * max(1, size // max(1, len(unit)))

    def out(text: str) -> Iterator[str]:
        key = text[:64] + str(len(text))
        if key not in seen:
            seen.add(key)
            yield text

    for c in chars:
        yield from out(fill(c))
        for d in chars:
            if d != c:
                yield from out(c + fill(d))
                yield from out(fill(c + d))
    for lit in literals:
        yield from out(fill(lit))
        for c in chars:
            yield from out(lit + fill(c))
            yield from out(fill(c) + lit)
            yield from out(fill(lit + c))
    for a, b in itertools.pairwise(literals):
        yield from out(fill(a + b))
        yield from out(a + fill(b))


# the modules whose patterns explain runs on log text, beside signatures' SIGNATURES
LOG_MODULES = (
    "envkit.serving.explain.signatures",
    "envkit.serving.explain.logfacts",
    "envkit.serving.explain.logread",
)


def log_patterns() -> dict[str, re.Pattern[str]]:
    """Every pattern explain runs on log text, by a name :func:`named` reads back:
    ``envkit.serving.explain.logfacts._ARGS`` and the like, ``SIGNATURES.3`` for a signature's."""
    from envkit.serving.explain import signatures

    found: dict[str, re.Pattern[str]] = {}
    for module in LOG_MODULES:
        for attr, value in vars(importlib.import_module(module)).items():
            if isinstance(value, re.Pattern):
                found[f"{module}.{attr}"] = value
    for i, sig in enumerate(signatures.SIGNATURES):
        found[f"SIGNATURES.{i}"] = sig.pattern
    return found


def named(name: str) -> re.Pattern[str]:
    """The pattern :func:`log_patterns` calls ``name`` (in a child process, by name)."""
    from envkit.serving.explain import signatures

    module, attr = name.rsplit(".", 1)
    if module == "SIGNATURES":
        return signatures.SIGNATURES[int(attr)].pattern
    pattern: re.Pattern[str] = getattr(importlib.import_module(module), attr)
    return pattern


def exercise(pattern: re.Pattern[str], line: str) -> None:
    """The work explain asks of a pattern on a line: a search, and a whole-line match."""
    pattern.search(line)
    pattern.fullmatch(line)


def hardest(
    pattern: re.Pattern[str], top: int = 5, *, sweep: int = 16 << 10, long: int = 1 << 20
) -> tuple[int, Iterator[str]]:
    """Every line shape of ``pattern`` tried at ``sweep`` characters (16 KiB, where a
    quadratic pattern is already a thousand times slower than a linear one); the ``top``
    slowest made again at ``long`` (1 MiB: the same shapes, 64 times longer), lazily: (how
    many shapes were tried, those long lines). Each is timed by the CPU it took
    (``time.process_time``), which a busy machine's other work does not stretch."""
    timed = []
    for i, line in enumerate(lines(pattern, sweep)):
        start = time.process_time()
        exercise(pattern, line)
        timed.append((time.process_time() - start, i))
    slowest = {i for _, i in sorted(timed, reverse=True)[:top]}
    return len(timed), (line for i, line in enumerate(lines(pattern, long)) if i in slowest)
