"""The vocabulary of verify and doctor: each check a :class:`~envkit.results.Result` (made by
:func:`check`: its kind the code, its name the subject, what was expected and found the
evidence) and a :class:`Report` of them for one venv and profile."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from envkit.results import Facts, Result, Severity, ok

if TYPE_CHECKING:  # compat loads the HTTP client; verify gets its answers through a callable
    from envkit.compat.check.checker import CompatReport

# (vllm version, transformers version) -> the compat report, or why it could not be made
CompatLookup = Callable[[str, str], Union["CompatReport", str]]


# the group verify's text shows a result under: its code, or the GPU layer's code's group
KIND = {
    "no-kernel-image": "gpu",
    "backend-without-kernels": "gpu",
    "no-common-gpu": "gpu",
    "runs-on": "gpu",
    "cuda-runtime-mismatch": "cuda",
    "kernels-do-not-link": "kernels",
    "kernels-not-checked": "kernels",
    "gpu-check-truncated": "kernels",
    "driver-too-old": "driver",
    "driver-older-than-toolkit": "driver",
    "driver-fits": "driver",
    "known-bad-pair": "compat",
    "requirement-violated": "compat",
    "pair-not-checked": "compat",
}
# each severity under its name of verify's JSON format 1 ("status")
STATUS = {
    Severity.OK: "pass",
    Severity.INFO: "pass",
    Severity.WARNING: "warn",
    Severity.UNKNOWN: "warn",
    Severity.ERROR: "fail",
}


def check(
    *,
    kind: str,
    name: str,
    status: Severity,
    expected: str = "",
    found: str = "",
    detail: str = "",
    fix: str = "",
) -> Result:
    """One of verify's checks as a result: ``kind`` (interpreter, version, import, probe,
    torch, compat, kernels, gpu, cuda, driver) is its code, ``name`` its subject, what was
    expected and found its evidence, ``detail`` its message."""
    return Result(
        code=kind, severity=status, subject=name, message=detail, fix=fix,
        evidence=Facts({"expected": expected, "found": found}),
    )  # fmt: skip


def kind_of(result: Result) -> str:
    """The group a result is shown in (``gpu`` for ``no-kernel-image``)."""
    return KIND.get(result.code, result.code)


def found_of(result: Result) -> str:
    """What a check found: its evidence's ``found``, else (a GPU layer's result) its code."""
    return result.fact("found") or result.code


def legacy(result: Result) -> dict[str, Any]:
    """A check's fields under their names of verify's JSON format 1, kept beside the
    result's own for the readers of that format."""
    return {
        "kind": kind_of(result),
        "name": result.subject or result.code,
        "status": STATUS[result.severity],
        "ok": not result.failed,
        "expected": result.fact("expected"),
        "found": found_of(result),
        "detail": result.message,
        "fix": result.fix,
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
    files_read: int  # ELF files read in this run
    files_remembered: int = 0  # answers kept from an earlier run at the same files

    def to_dict(self) -> dict[str, Any]:
        return {
            "capability": self.capability or None,
            "name": self.name,
            "driver": self.driver or None,
            "source": self.source,
            "runs_on": list(self.runs_on),
            "torch_cuda": self.torch_cuda or None,
            "files_read": self.files_read,
            "files_remembered": self.files_remembered,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    profile: str
    venv: Path
    python: str
    checks: tuple[Result, ...] = field(default_factory=tuple)
    gpu: GpuSide | None = None  # None when the GPU layer was not looked at

    @property
    def ok(self) -> bool:
        return ok(self.checks)

    @property
    def failures(self) -> tuple[Result, ...]:
        return tuple(c for c in self.checks if c.failed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "profile": self.profile,
            "venv": str(self.venv),
            "python": self.python,
            "checks": [{**legacy(c), **c.to_dict()} for c in self.checks],
            "gpu": self.gpu.to_dict() if self.gpu is not None else None,
        }
