"""The verdict of one build read from its wheel (:mod:`envkit.gpu.published.wheelkernels`) on one
GPU,
for envkit's kernel table (:mod:`envkit.gpu.published.kerneltable`).

A build runs on a GPU when each of its core modules has a kernel image for it in every main
fatbin container (the rule of :mod:`envkit.gpu.binaries.images`, counted on the containers the table
keeps); it has no kernel image when one of them does not; and it is unknown when a core
module could not be read, carries no kernels, or the build has none: never a guess.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import Enum

from envkit.gpu.arch import Capability, Kind
from envkit.gpu.binaries.images import Verdict as ImageVerdict
from envkit.gpu.published.wheelkernels import ModuleKernels, WheelKernels


class Verdict(str, Enum):
    RUNS = "runs"
    NO_KERNEL_IMAGE = "no-kernel-image"
    UNKNOWN = "unknown"  # the table does not hold the build, or could not read it


@dataclass(frozen=True)
class BuildVerdict:
    """One build on one GPU: the verdict, what the build has, and one line saying so."""

    build: str  # 'vLLM 0.8.5', 'torch 2.6.0 (CUDA 12.4)'
    capability: Capability
    verdict: Verdict
    has: str  # 'sm_70, sm_75, sm_80, sm_86, sm_89, sm_90 + PTX compute_90'; '' when unknown
    reason: str

    def describe(self) -> str:
        return self.reason


@functools.lru_cache(maxsize=512)  # asked for each GPU envkit knows, of the same builds
def has(modules: tuple[ModuleKernels, ...]) -> str:
    """The targets the modules' main containers hold for GPUs every main container runs
    on (:meth:`~envkit.gpu.binaries.images.Images.main_targets`, the verdict's own rule), in one
    line
    (per module when they differ): what the verdict rests on."""
    lines: dict[str, list[str]] = {}
    for module in modules:
        held = module.images
        if held is None:
            continue
        main = held.main_targets()
        sass = ", ".join(str(t) for t in sorted(main) if t.kind is Kind.SASS)
        ptx = " ".join(str(t) for t in sorted(main) if t.kind is Kind.PTX)
        line = f"{sass} + PTX {ptx}" if sass and ptx else sass or f"PTX {ptx}"
        lines.setdefault(line, []).append(module.member.rsplit("/", 1)[-1].split(".")[0])
    if len(lines) <= 1:
        return next(iter(lines), "")
    return "; ".join(f"{'/'.join(names)}: {line}" for line, names in lines.items())


def build_verdict(build: str, wheel: WheelKernels, capability: Capability) -> BuildVerdict:
    """``build`` (its name for the line) on ``capability``, from its wheel's core modules."""
    core = wheel.core
    line = has(core)
    for module in core:
        images = module.images
        if images is not None and images.on(capability).verdict is ImageVerdict.NO_KERNEL_IMAGE:
            name = module.member.rsplit("/", 1)[-1]
            why = f"{build}'s {name} has no kernel image for {capability} (it has {line})"
            return BuildVerdict(build, capability, Verdict.NO_KERNEL_IMAGE, line, why)
    damaged = next((m for m in core if m.damaged), None)
    if damaged is not None:
        why = f"{build}: {damaged.member} could not be read ({damaged.damaged})"
    elif not core:
        why = f"{build}: no core module in {wheel.filename}"
    elif not line:
        why = f"{build}: its core modules carry no GPU kernels"
    else:
        why = f"{build} has kernel images for {capability} ({line})"
        return BuildVerdict(build, capability, Verdict.RUNS, line, why)
    return BuildVerdict(build, capability, Verdict.UNKNOWN, line, why)


def unknown(build: str, capability: Capability, why: str) -> BuildVerdict:
    return BuildVerdict(build, capability, Verdict.UNKNOWN, "", f"{build}: {why}")


@dataclass(frozen=True)
class ReleaseVerdict:
    """A vLLM release and the default build of the torch it pins, on one GPU: runs when both
    run, no-kernel-image when either has none, unknown otherwise."""

    version: str
    capability: Capability
    verdict: Verdict
    vllm: BuildVerdict
    torch: BuildVerdict

    def describe(self) -> str:
        return f"{self.vllm.reason}; {self.torch.reason}"


def release(
    version: str, capability: Capability, vllm: BuildVerdict, torch: BuildVerdict
) -> ReleaseVerdict:
    """The two builds' verdicts together (the rule in :class:`ReleaseVerdict`)."""
    verdicts = {vllm.verdict, torch.verdict}
    if Verdict.NO_KERNEL_IMAGE in verdicts:
        verdict = Verdict.NO_KERNEL_IMAGE
    else:
        verdict = Verdict.RUNS if verdicts == {Verdict.RUNS} else Verdict.UNKNOWN
    return ReleaseVerdict(version, capability, verdict, vllm, torch)
