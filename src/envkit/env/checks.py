"""The vocabulary of verify and doctor: a :class:`Check` (kind, name, status, what was
expected and found, why, the fix) and a :class:`Report` of them for one venv and profile."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:  # compat loads the HTTP client; verify gets its answers through a callable
    from envkit.compat.check.checker import CompatReport

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
class GpuSide:
    """What the GPU layer's checks were made for (verify's JSON ``gpu``)."""

    capability: str  # the target's compute capability, '' without a target
    name: str  # the card's name, when known
    driver: str  # the target's driver version, when known
    source: str  # where the target came from: "--gpu rtx-5090", "nvidia-smi: ...", ""
    runs_on: tuple[str, ...]  # compute capabilities every core module has images for
    torch_cuda: str  # torch.version.cuda as the environment's torch/version.py says
    files_read: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "capability": self.capability or None,
            "name": self.name,
            "driver": self.driver or None,
            "source": self.source,
            "runs_on": list(self.runs_on),
            "torch_cuda": self.torch_cuda or None,
            "files_read": self.files_read,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    profile: str
    venv: Path
    python: str
    checks: tuple[Check, ...] = field(default_factory=tuple)
    gpu: GpuSide | None = None  # None when the GPU layer was not looked at

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
            "gpu": self.gpu.to_dict() if self.gpu is not None else None,
        }
