"""The vocabulary of verify and doctor: a :class:`Check` (kind, name, status, what was
expected and found, why, the fix) and a :class:`Report` of them for one venv and profile."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:  # compat loads the HTTP client; verify gets its answers through a callable
    from envkit.compat.checker import CompatReport

# (vllm version, transformers version) -> the compat report, or why it could not be made
CompatLookup = Callable[[str, str], Union["CompatReport", str]]


class Status(enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    kind: str  # interpreter | version | import | probe | torch | compat
    name: str
    status: Status
    expected: str = ""
    found: str = ""
    detail: str = ""
    fix: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "status": self.status.value,
            "ok": self.status is not Status.FAIL,
            "expected": self.expected,
            "found": self.found,
            "detail": self.detail,
            "fix": self.fix,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    profile: str
    venv: Path
    python: str
    checks: tuple[Check, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return all(c.status is not Status.FAIL for c in self.checks)

    @property
    def failures(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status is Status.FAIL)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "profile": self.profile,
            "venv": str(self.venv),
            "python": self.python,
            "checks": [c.to_dict() for c in self.checks],
        }
