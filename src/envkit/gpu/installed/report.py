"""What the GPU layer's one look at an environment answers
(:func:`envkit.gpu.installed.assess.assess`):
the target GPU, each compiled module's kernels and missing CUDA libraries, each package's
linkage against torch, and the findings for people."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from envkit.gpu.arch import Capability
from envkit.gpu.binaries.images import Coverage, Images
from envkit.gpu.roles import Role
from envkit.gpu.target import GpuTarget
from envkit.results import Result, Severity

if TYPE_CHECKING:  # for their types: the reading (pyelftools) is assess's, not the report's
    from envkit.gpu.binaries import cudalibs
    from envkit.gpu.installed import linkage


@dataclass(frozen=True)
class ModuleReport:
    """One compiled file: its kernels and the CUDA libraries it lacks."""

    path: str  # relative to site-packages
    package: str  # vllm, torch, flash_attn, nvidia...
    role: Role
    images: Images | None  # None: no GPU code, or it could not be read (then `damaged`)
    damaged: str = ""  # why its ELF file or fatbin section could not be read
    coverage: Coverage | None = None  # on the target GPU, when there is one and kernels
    missing_cuda: tuple[cudalibs.Missing, ...] = ()
    links_torch: bool = False  # a torch extension (vLLM loads those), not a standalone one

    @property
    def loaded_with_vllm(self) -> bool:
        """Whether vLLM's start-up loads it: torch's and vLLM's own files and the torch
        extensions; a standalone CUDA package's module (cupy's cudnn bindings) is loaded only
        by what imports it."""
        return self.role is Role.CORE or self.package in ("vllm", "torch") or self.links_torch


@dataclass(frozen=True)
class GpuReport:
    """What :func:`envkit.gpu.installed.assess.assess` found; ``findings`` are for people (codes:
    no-kernel-image, backend-without-kernels, no-common-gpu, runs-on, cuda-runtime-mismatch,
    kernels-do-not-link, kernels-not-checked, driver-too-old, driver-older-than-toolkit,
    gpu-check-truncated), the rest for programs."""

    site_packages: str
    target: GpuTarget | None
    torch_cuda: str  # torch.version.cuda as torch/version.py says it ('' when unknown)
    modules: tuple[ModuleReport, ...]
    cuda: cudalibs.Provided  # the CUDA libraries the environment holds
    linkage: linkage.SiteLinkage | None  # None without torch/lib
    runs_on: tuple[Capability, ...]  # where every core module has kernel images
    findings: tuple[Result, ...]
    files_read: int  # read in this look
    seconds: float
    files_remembered: int = 0  # answers kept from an earlier look at the same files

    @property
    def ok(self) -> bool:
        """No finding is an error."""
        return not any(f.severity is Severity.ERROR for f in self.findings)

    @property
    def packages(self) -> tuple[str, ...]:
        return tuple(sorted({m.package for m in self.modules}))

    def of(self, package: str) -> tuple[ModuleReport, ...]:
        """The modules of one package."""
        return tuple(m for m in self.modules if m.package == package)
