"""``envkit lint``'s API: stand-in until the lint branch lands.

The lint branch replaces this module with the real checks (every flag against the arg parser
of the profile's vLLM release). Until then :func:`lint_args` finds nothing, so callers and
their refusal paths are written against the final API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envkit.index.session import IndexSession
    from envkit.profiles.profile import Profile


@dataclass(frozen=True)
class LintFinding:
    code: str
    severity: str  # "error" | "warning" | "info"
    subject: str
    message: str
    fix: str


@dataclass(frozen=True)
class LintReport:
    vllm: str
    findings: tuple[LintFinding, ...]

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "vllm": self.vllm,
            "ok": self.ok,
            "findings": [
                {
                    "code": f.code,
                    "severity": f.severity,
                    "subject": f.subject,
                    "message": f.message,
                    "fix": f.fix,
                }
                for f in self.findings
            ],
        }


def lint_args(
    profile: Profile,
    args: Sequence[str],
    env: Mapping[str, str] = {},
    *,
    session: IndexSession | None = None,
) -> LintReport:
    """Stand-in until the lint branch lands: an empty report (ok)."""
    return LintReport(vllm=profile.models.vllm, findings=())
