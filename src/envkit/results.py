"""The one record of a check's result: a :class:`Result` (code, severity, subject, message,
evidence, fix) that every check returns and every renderer and schema reads.

A severity is an enum, never a boolean (nox's ``Status``): ``ok`` the thing checked holds,
``info`` worth knowing, ``warning`` it holds but will likely bite, ``unknown`` the check could
not be made (a network failure, an unreadable wheel: never a pass and never a fail), ``error``
it does not hold. ``evidence`` says where the answer came from (the file, member, line or value
read), as a few short strings or a frozen mapping; ``subject`` what was checked (a package, a
module, a flag, a node, ``file [key]:line``).

>>> r = Result(code="driver-too-old", severity=Severity.ERROR, subject="driver",
...            message="driver 470.57 cannot run CUDA 12.4", evidence={"found": "470.57"})
>>> r.evidence["found"], r.to_dict()["severity"]
('470.57', 'error')
>>> Result.from_dict(r.to_dict()) == r
True
>>> worst([r, ok_result("python", "3.12")]) is Severity.ERROR, exit_code([r])
(True, 1)
>>> Severity.UNKNOWN.failed, Severity.UNKNOWN > Severity.WARNING
(False, True)
>>> s = Result(code="c", severity=Severity.WARNING, evidence={"only": listing(["A", "B"])},
...            fix="pin it\\nrebuild")
>>> s.facts("only"), s.steps
(('A', 'B'), ('pin it', 'rebuild'))
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any


class Severity(str, enum.Enum):
    """How a result stands, in the order :func:`worst` ranks them."""

    OK = "ok"  # what was checked holds
    INFO = "info"  # worth knowing; holds
    WARNING = "warning"  # holds, but something will likely bite
    UNKNOWN = "unknown"  # could not be checked: no verdict either way
    ERROR = "error"  # does not hold (exit 1)

    @property
    def rank(self) -> int:
        return _RANK[self]

    @property
    def failed(self) -> bool:
        """Whether a result of this severity fails its command (only ``error`` does)."""
        return self is Severity.ERROR

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank < other.rank

    # str's own comparisons would order by the value's letters
    def __le__(self, other: object) -> bool:
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank <= other.rank

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank > other.rank

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank >= other.rank


_RANK = {s: i for i, s in enumerate(Severity)}


class Facts(Mapping[str, str]):
    """A frozen, hashable mapping of short strings: a result's evidence by name."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        self._items: tuple[tuple[str, str], ...] = tuple((str(k), str(v)) for k, v in pairs)

    def __getitem__(self, key: str) -> str:
        for name, value in self._items:
            if name == key:
                return value
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(frozenset(self._items))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    def __repr__(self) -> str:
        return f"Facts({dict(self._items)!r})"


LIST_SEPARATOR = ", "  # between the values of one fact that lists several


def listing(values: Iterable[str]) -> str:
    """Several values as one fact, which :meth:`Result.facts` reads back: names and labels,
    which hold no separator (one inside a value is closed up to ``,``, so that the fact still
    reads back as as many values as were given)."""
    return LIST_SEPARATOR.join(v.replace(LIST_SEPARATOR, ",") for v in values)


# named values (a Facts once made) or short strings
Evidence = tuple[str, ...] | Mapping[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """One check's answer. ``code`` is stable, for programs (``driver-too-old``,
    ``unknown-flag``); ``message`` one sentence for people; ``fix`` what to do, as a command
    or a change, when there is one (several steps one a line: :attr:`steps`)."""

    code: str
    severity: Severity
    subject: str = ""
    message: str = ""
    evidence: Evidence = ()
    fix: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.evidence, Mapping) and not isinstance(self.evidence, Facts):
            object.__setattr__(self, "evidence", Facts(self.evidence))
        elif isinstance(self.evidence, list):
            object.__setattr__(self, "evidence", tuple(map(str, self.evidence)))

    @property
    def failed(self) -> bool:
        return self.severity.failed

    def fact(self, name: str, default: str = "") -> str:
        """One named piece of the evidence (``default`` when it has none by that name)."""
        return self.evidence.get(name, default) if isinstance(self.evidence, Mapping) else default

    def facts(self, name: str) -> tuple[str, ...]:
        """A named piece of the evidence that lists several values (:func:`listing` joined
        them); none when the evidence has none by that name."""
        said = self.fact(name)
        return tuple(said.split(LIST_SEPARATOR)) if said else ()

    @property
    def steps(self) -> tuple[str, ...]:
        """The fix's steps, one a line (none when there is no fix)."""
        return tuple(self.fix.split("\n")) if self.fix else ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape every command's ``$defs/result`` reads: evidence is a list of
        strings or an object of strings."""
        evidence: Any = (
            dict(self.evidence.items()) if isinstance(self.evidence, Facts) else list(self.evidence)
        )
        return {
            "code": self.code,
            "severity": self.severity.value,
            "subject": self.subject,
            "message": self.message,
            "evidence": evidence,
            "fix": self.fix,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Result:
        """The record :meth:`to_dict` wrote (ValueError on a severity it does not know)."""
        raw = data.get("evidence", ())
        evidence: Evidence = (
            Facts({str(k): str(v) for k, v in raw.items()})
            if isinstance(raw, Mapping)
            else tuple(map(str, raw))
        )
        return cls(
            code=str(data["code"]),
            severity=Severity(data["severity"]),
            subject=str(data.get("subject", "")),
            message=str(data.get("message", "")),
            evidence=evidence,
            fix=str(data.get("fix", "")),
        )


def ok_result(code: str, subject: str = "", message: str = "", **facts: str) -> Result:
    """A check that holds."""
    return Result(code=code, severity=Severity.OK, subject=subject, message=message,
                  evidence=Facts(facts))  # fmt: skip


def worst(results: Iterable[Result]) -> Severity:
    """The gravest severity among ``results`` (``ok`` for none)."""
    return max((r.severity for r in results), default=Severity.OK)


def ok(results: Iterable[Result]) -> bool:
    """Whether no result fails (``unknown`` does not: it is no verdict)."""
    return not any(r.failed for r in results)


def failed_codes(results: Iterable[Result]) -> str:
    """The codes of the failing ``results``, each once, as one fact (:func:`listing`): the
    evidence of a verdict made of them."""
    return listing(dict.fromkeys(r.code for r in results if r.failed))


def fixes(results: Iterable[Result]) -> str:
    """The fixes of the failing ``results``, each once, one a line: a verdict made of them
    fixes what each says."""
    return "\n".join(dict.fromkeys(r.fix for r in results if r.failed and r.fix))


def exit_code(results: Iterable[Result]) -> int:
    """1 when a result fails, else 0: the exit code of a command made of checks."""
    return 0 if ok(results) else 1
