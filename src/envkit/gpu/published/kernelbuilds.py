"""The builds of envkit's kernel table (:mod:`envkit.gpu.published.kerneltable`, which
reads them and answers the lookups): a vLLM release's default wheel (:class:`VllmBuild`), a
torch build (:class:`TorchBuild`), each with its verdict on a capability, and the table that
holds them (:class:`KernelTable`), looked up by release, CUDA and platform."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from packaging.version import InvalidVersion, Version

from envkit.gpu.arch import Capability
from envkit.gpu.published.kernelverdict import (
    BuildVerdict,
    ReleaseVerdict,
    Verdict,
    build_verdict,
    has,
    release,
    unknown,
)
from envkit.gpu.published.wheelkernels import WheelKernels

PLATFORMS = ("linux-x86_64", "linux-aarch64")
X86 = PLATFORMS[0]
MEMO = 64  # verdicts kept per build (KNOWN has 19 capabilities; --compute-capability any)


def _kept(
    memo: dict[Capability, BuildVerdict], capability: Capability, verdict: BuildVerdict
) -> BuildVerdict:
    if len(memo) < MEMO:
        memo[capability] = verdict
    return verdict


def wheel_platform(filename: str) -> str:
    """The matrix platform a Linux wheel's file name is for: linux-aarch64 or linux-x86_64."""
    return "linux-aarch64" if filename.endswith("aarch64.whl") else X86


@dataclass(frozen=True)
class VllmBuild:
    """A vLLM release's default wheel, as read."""

    version: str
    wheel: WheelKernels
    source: str  # where it was read ('the package index')

    @property
    def platform(self) -> str:
        return wheel_platform(self.wheel.filename)

    @property
    def torch(self) -> str:
        """The torch release it pins ('2.6.0'); '' when its metadata gives a range or none."""
        from envkit.gpu.published import kernelgen  # the index readers: not for a lookup

        return kernelgen.pinned_torch(self.wheel.requires_torch)

    @property
    def cuda_majors(self) -> tuple[int, ...]:
        """The CUDA runtime majors its core modules need (libcudart.so.N), lowest first."""
        return tuple(sorted({n for m in self.wheel.core for n in m.cuda_majors()}))

    @property
    def cuda_major(self) -> int | None:
        """The lowest CUDA runtime major the release needs: a machine must provide libcudart
        of that major (12 for vLLM 0.8.5); None when its core modules name none."""
        majors = self.cuda_majors
        return max(majors) if majors else None

    def targets(self) -> str:
        """What its core modules' main containers carry, in one line."""
        return has(self.wheel.core)

    @functools.cached_property
    def _verdicts(self) -> dict[Capability, BuildVerdict]:
        return {}

    def on(self, capability: Capability) -> BuildVerdict:
        """Its verdict on ``capability``: a pure function of the frozen build, kept per
        capability (check-model and which ask it for every GPU, profile and call)."""
        known = self._verdicts.get(capability)
        if known is not None:
            return known
        verdict = build_verdict(f"vLLM {self.version}", self.wheel, capability)
        return _kept(self._verdicts, capability, verdict)


@dataclass(frozen=True)
class TorchBuild:
    """One torch build (version, CUDA), as read."""

    version: str  # '2.6.0' (without the local '+cu124')
    cuda: str  # torch.version.cuda: '12.4'; '' for a CPU build
    default: bool  # the package index's default build of the release
    wheel: WheelKernels
    source: str

    @property
    def platform(self) -> str:
        return wheel_platform(self.wheel.filename)

    @property
    def label(self) -> str:
        arm = ", aarch64" if self.platform != X86 else ""
        return f"torch {self.version} (CUDA {self.cuda or 'none'}{arm})"

    def targets(self) -> str:
        return has(self.wheel.core)

    @functools.cached_property
    def _verdicts(self) -> dict[Capability, BuildVerdict]:
        return {}

    def on(self, capability: Capability) -> BuildVerdict:
        """Its verdict on ``capability``, kept per capability as :meth:`VllmBuild.on`'s."""
        known = self._verdicts.get(capability)
        if known is not None:
            return known
        if not self.cuda and not self.wheel.core:
            # torch.version.cuda is None and no libtorch_cuda: a CPU-only build (the package
            # index's default aarch64 wheels of torch 2.8-2.10), which runs on no GPU at all
            why = f"{self.label} is a CPU-only build ({self.wheel.filename}): no GPU kernels"
            verdict = BuildVerdict(self.label, capability, Verdict.NO_KERNEL_IMAGE, "", why)
        else:
            verdict = build_verdict(self.label, self.wheel, capability)
        return _kept(self._verdicts, capability, verdict)


@dataclass(frozen=True)
class KernelTable:
    about: str
    generated: str
    source: str
    vllm: tuple[VllmBuild, ...]
    torch: tuple[TorchBuild, ...]
    problems: tuple[str, ...] = ()  # entries left out on loading, and why
    notes: tuple[str, ...] = ()  # what the generator could not read, and why
    no_wheel: tuple[tuple[str, str], ...] = ()  # (platform, vLLM version): publishes none

    @functools.cached_property
    def _vllm_index(self) -> dict[tuple[Version | None, str], VllmBuild]:
        """The first build of each (release, platform), as a scan in order finds it."""
        found: dict[tuple[Version | None, str], VllmBuild] = {}
        for b in self.vllm:
            found.setdefault((version_of(b.version), b.platform), b)
        return found

    @functools.cached_property
    def _torch_index(self) -> dict[tuple[Version | None, str], tuple[TorchBuild, ...]]:
        """The builds of each (release, platform), in the table's order."""
        found: dict[tuple[Version | None, str], list[TorchBuild]] = {}
        for b in self.torch:
            found.setdefault((version_of(b.version), b.platform), []).append(b)
        return {key: tuple(builds) for key, builds in found.items()}

    def vllm_build(self, version: str, platform: str = X86) -> VllmBuild | None:
        return self._vllm_index.get((version_of(version), platform))

    def publishes_no_wheel(self, version: str, platform: str) -> bool:
        """Whether the index was read and vLLM ``version`` has no wheel for ``platform``."""
        wanted = version_of(version)
        return any(p == platform and version_of(v) == wanted for p, v in self.no_wheel)

    def torch_build(
        self, version: str, cuda: str | None = None, platform: str = X86
    ) -> TorchBuild | None:
        """The default build of torch ``version``, or its build for ``cuda`` ('12.4'), for
        ``platform``."""
        wanted = version_of(version.split("+")[0])
        for build in self._torch_index.get((wanted, platform), ()):
            if (cuda is None and build.default) or (cuda is not None and _same_cuda(build, cuda)):
                return build
        return None

    def release_verdict(
        self, version: str, capability: Capability, platform: str = X86
    ) -> ReleaseVerdict:
        """:func:`vllm_release_verdict` on this table."""
        label = f"vLLM {version}"
        build = self.vllm_build(version, platform)
        if build is None and self.publishes_no_wheel(version, platform):
            vllm = unknown(label, capability, f"publishes no {platform} wheel")
            torch = unknown("its torch", capability, f"not read (no {platform} wheel of vLLM)")
        elif build is None:
            vllm = unknown(label, capability, "not in envkit's kernel table")
            torch = unknown("its torch", capability, "not known (vLLM not in the table)")
        else:
            vllm = build.on(capability)
            tb = self.torch_build(build.torch, None, platform) if build.torch else None
            if tb is not None:
                torch = tb.on(capability)
            elif build.torch:
                torch = unknown(f"torch {build.torch}", capability, "not in envkit's table")
            else:
                pin = build.wheel.requires_torch or "nothing"
                torch = unknown("its torch", capability, f"not pinned (it asks {pin})")
        return release(version, capability, vllm, torch)

    def to_document(self) -> dict[str, Any]:
        return {
            "about": self.about,
            "generated": self.generated,
            "source": self.source,
            "notes": list(self.notes),
            "no_wheel": [{"platform": p, "vllm": v} for p, v in self.no_wheel],
            "vllm": [{**b.wheel.to_entry(), "source": b.source} for b in self.vllm],
            "torch": [
                {**b.wheel.to_entry(), "default": b.default, "source": b.source} for b in self.torch
            ],
        }


@functools.lru_cache(maxsize=1024)  # every lookup parses the versions it compares
def version_of(text: str) -> Version | None:
    """``text`` as a Version (one object per text: do not change it); None when it is not one."""
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _same_cuda(build: TorchBuild, cuda: str) -> bool:
    return build.cuda.split(".")[:2] == cuda.strip().split(".")[:2]
