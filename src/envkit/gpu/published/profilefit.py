"""Can a profile's builds run on a GPU, before anything is installed?

From envkit's kernel table (:mod:`envkit.gpu.published.kerneltable`, read from the published
wheels):
the pinned vLLM release's core modules and the pinned torch build's CUDA libraries must have
kernel images for the GPU's compute capability (``no-kernel-image`` otherwise, naming what the
build has and the first release whose builds carry the GPU); the CUDA runtime major vLLM's
modules need must be the one torch brings (``cuda-runtime-mismatch``); the GPU's driver, when
known, must run torch's CUDA (``driver-too-old``). A build the table does not hold is said
(``kernels-not-known``, unknown: no verdict), never guessed; a release the index shows with no wheel
for the target's platform (an aarch64 host: GH200, GB200, DGX Spark) is ``no-platform-wheel``,
naming the first release that has one. check-model, which and plan add these
findings to each profile's verdict; new-profile's solver asks the same questions.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from envkit.gpu.arch import KNOWN, Capability
from envkit.gpu.driver import DriverFit, fit, toolkit_driver
from envkit.gpu.published import kerneltable
from envkit.gpu.published.kerneltable import X86, KernelTable, TorchBuild, VllmBuild
from envkit.gpu.published.kernelverdict import BuildVerdict, Verdict
from envkit.gpu.target import GpuTarget
from envkit.profiles.profile import Profile
from envkit.results import Result, Severity

NO_IMAGE = "'no kernel image is available for execution on the device'"
GpuCheck = Callable[[Profile], tuple[Result, ...]]


def build_cuda(profile: Profile) -> str:
    """The CUDA the profile's torch build reports ('12.4'), '' for none or unknown."""
    if profile.torch.cuda:
        return profile.torch.cuda
    backend = profile.torch.backend
    if backend.startswith("cu") and backend[2:].isdigit() and len(backend) >= 5:
        return f"{backend[2:-1]}.{backend[-1]}"
    return ""


def checker(target: GpuTarget | None, table: KernelTable | None = None) -> GpuCheck:
    """check-model's question for every profile: its findings on ``target``; without one,
    which compute capabilities its builds run on (information, ``runs-on``)."""
    known = table or kerneltable.shipped()
    if target is None:
        return lambda profile: runs_on(profile, known)
    return lambda profile: on_gpu(profile, target, known)


@dataclass(frozen=True)
class Pinned:
    """A profile's pinned vLLM and torch (the torch vLLM pins when the profile does not) and
    their builds in the table (None where it lacks them)."""

    vllm: str
    torch: str
    build: VllmBuild | None
    torch_build: TorchBuild | None

    @classmethod
    def of(cls, profile: Profile, table: KernelTable, platform: str = X86) -> Pinned:
        pins = profile.expected_versions()
        vllm = pins.get("vllm", "")
        build = table.vllm_build(vllm, platform) if vllm else None
        torch = pins.get("torch", "") or (build.torch if build is not None else "")
        cuda = build_cuda(profile) or None
        torch_build = table.torch_build(torch, cuda, platform) if torch else None
        return cls(vllm, torch, build, torch_build)


def no_wheel(vllm: str, platform: str, table: KernelTable, where: str) -> Result | None:
    """``no-platform-wheel`` when the index shows vLLM ``vllm`` with no wheel for
    ``platform`` (said as a fact, naming the first release with one), else None."""
    if not vllm or not table.publishes_no_wheel(vllm, platform):
        return None
    having = sorted({Version(b.version) for b in table.vllm if b.platform == platform})
    first = f"; the first with one is vLLM {having[0]}" if having else ""
    return Result(
        severity=Severity.ERROR,
        code="no-platform-wheel",
        message=f"vLLM {vllm} publishes no {platform} wheel on the package index: it does not "
        f"install on {where}{first}",
        fix="draft a profile for that platform: envkit new-profile NAME --for-model MODEL "
        f"--platform {platform}",
    )


def runs_on(profile: Profile, table: KernelTable) -> tuple[Result, ...]:
    """Where the profile's pinned vLLM and torch builds both have kernel images (the cards
    envkit knows, by compute capability); nothing when the table lacks either build."""
    pinned = Pinned.of(profile, table)
    build, torch_build = pinned.build, pinned.torch_build
    arm = [
        found
        for plat in profile.matrix.platforms
        if plat != X86 and (found := no_wheel(pinned.vllm, plat, table, f"its {plat} cells"))
    ]
    if build is None or torch_build is None:
        return tuple(arm)
    able = [
        c
        for c in KNOWN
        if build.on(c).verdict is Verdict.RUNS and torch_build.on(c).verdict is Verdict.RUNS
    ]
    return (
        Result(
            severity=Severity.INFO,
            code="runs-on",
            message=f"its builds, vLLM {build.version} and {torch_build.label}, have kernels for "
            f"compute capabilities {', '.join(map(str, able)) or 'none envkit knows'}",
            fix="name the GPU to check it: --gpu NAME or --compute-capability X.Y",
        ),
        *arm,
    )


def on_gpu(profile: Profile, target: GpuTarget, table: KernelTable) -> tuple[Result, ...]:
    """The profile's pinned vLLM and torch build on ``target`` (see the module's text)."""
    pinned = Pinned.of(profile, table, target.platform)
    vllm, torch, build, torch_build = pinned.vllm, pinned.torch, pinned.build, pinned.torch_build
    missing = no_wheel(vllm, target.platform, table, f"{target}'s {target.platform} host")
    if missing is not None:
        return (missing,)  # nothing installs: no kernel question to ask
    cuda = build_cuda(profile)
    found: list[Result] = []
    verdicts: list[BuildVerdict] = [
        b.on(target.capability) for b in (build, torch_build) if b is not None
    ]
    for verdict in verdicts:
        if verdict.verdict is Verdict.NO_KERNEL_IMAGE:
            lacking = _no_image(verdict, target, table)
            said = any(f.fix == lacking.fix for f in found)  # one fix serves both builds
            found.append(dataclasses.replace(lacking, fix="") if said else lacking)
    unknown = [
        *([f"vLLM {vllm}"] if vllm and build is None else []),
        *([f"torch {torch}"] if torch and torch_build is None else []),
        *(v.build for v in verdicts if v.verdict is Verdict.UNKNOWN),
    ]
    if unknown:
        found.append(
            Result(
                severity=Severity.UNKNOWN,
                code="kernels-not-known",
                message=f"{' and '.join(unknown)}: not in envkit's kernel table, so whether "
                f"its kernels run on {target} is not decided here",
                fix=f"envkit verify {profile.name} --compute-capability {target.capability} "
                "reads the installed builds",
            )
        )
    major = build.cuda_major if build is not None else None
    if major is not None and cuda and int(cuda.split(".")[0]) != major:
        found.append(
            Result(
                severity=Severity.ERROR,
                code="cuda-runtime-mismatch",
                message=f"vLLM {vllm}'s modules need CUDA {major}'s runtime "
                f"(libcudart.so.{major}); the profile's torch is a CUDA {cuda} build",
                fix=f"use torch's CUDA {major} build, the one vLLM {vllm} pins",
            )
        )
    if target.driver is not None and cuda and fit(target.driver, cuda) is DriverFit.TOO_OLD:
        found.append(
            Result(
                severity=Severity.ERROR,
                code="driver-too-old",
                message=f"driver {target.driver} cannot run the profile's CUDA {cuda} torch "
                f"build (it needs {toolkit_driver(cuda)} or newer)",
                fix=f"install NVIDIA driver {toolkit_driver(cuda)} or newer, or draft a "
                "profile for this driver: envkit new-profile NAME --for-model MODEL --driver "
                f"{target.driver}",
            )
        )
    return tuple(found)


def _no_image(verdict: BuildVerdict, target: GpuTarget, table: KernelTable) -> Result:
    return Result(
        severity=Severity.ERROR,
        code="no-kernel-image",
        message=f"{verdict.reason}: on {target} vLLM fails with {NO_IMAGE}",
        fix="draft a profile for this GPU: envkit new-profile NAME --for-model MODEL "
        f"--compute-capability {target.capability}{releases_said(target.capability, table)}",
    )


def releases_said(gpu: Capability, table: KernelTable | None = None) -> str:
    """' (the vLLM releases whose builds ... run from vLLM A to B)' for a fix; '' for none."""
    found = releases_for(gpu, table) if table is not None else _shipped_releases_for(gpu)
    if not found:
        return ""
    first, newest = found
    span = f"vLLM {first}" if first == newest else f"vLLM {first} to {newest}"
    return (
        f" (the releases whose default builds, with the torch they pin, carry kernels for "
        f"{gpu}: {span})"
    )


@functools.lru_cache(maxsize=32)
def _shipped_releases_for(gpu: Capability) -> tuple[str, str] | None:
    """:func:`releases_for` on the shipped table, once per GPU and process (every fix of
    every profile names it)."""
    return releases_for(gpu, kerneltable.shipped())


def releases_for(gpu: Capability, table: KernelTable) -> tuple[str, str] | None:
    """The oldest and the newest vLLM release in the table whose default builds (vLLM and its
    torch) run on ``gpu``; None when none does."""
    running = [
        build.version
        for build in sorted(table.vllm, key=lambda b: _version(b.version))
        if table.release_verdict(build.version, gpu).verdict is Verdict.RUNS
    ]
    return (running[0], running[-1]) if running else None


def _version(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


def release_runs_on(table: KernelTable, vllm: str, platform: str = "linux-x86_64") -> str:
    """For a draft made without a GPU: which compute capabilities the release's default
    builds (vLLM and the torch it pins) for ``platform`` have kernels for, as the table says."""
    verdicts = [table.release_verdict(vllm, c, platform) for c in KNOWN]
    able = [c for c, v in zip(KNOWN, verdicts, strict=True) if v.verdict is Verdict.RUNS]
    arm = f" {platform}" if platform != "linux-x86_64" else ""
    if able:
        return (
            f"vLLM {vllm} and its torch's default{arm} build have kernels for compute "
            "capabilities " + ", ".join(map(str, able))
        )
    return f"which GPUs vLLM {vllm}'s builds run on is not in envkit's kernel table"
