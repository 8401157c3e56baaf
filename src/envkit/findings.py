"""One shape for "something is wrong, here is why and what to do", shared by check-model,
doctor and plan: a :class:`Finding` with a code, a message, a fix, a severity and a place."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Severity(str, Enum):
    ERROR = "error"  # the thing asked for does not hold (exit 1)
    WARNING = "warning"  # it holds, but something will likely bite
    INFO = "info"  # worth knowing


@dataclass(frozen=True, kw_only=True)
class Finding:
    code: str  # stable, for programs: unknown-model-type, exceeds-free-memory, ...
    message: str  # one sentence for people, with the evidence
    fix: str = ""  # what to do, as a command or a change when there is one
    severity: Severity = Severity.ERROR
    where: str = ""  # the file, setting or place it concerns, when there is one

    def to_dict(self) -> dict[str, str]:
        return {
            "code": self.code,
            "message": self.message,
            "fix": self.fix,
            "severity": self.severity.value,
            "where": self.where,
        }
