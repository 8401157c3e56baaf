"""One look at an environment's GPU side, from its files alone (no GPU needed).

:func:`assess` reads a site-packages once: torch's own libraries (``torch/lib``), every
extension module that links torch or needs a CUDA library, and NVIDIA's libraries; and
answers, per package and module, whether its kernels have images for the target GPU
(:mod:`envkit.gpu.images`), whether the CUDA libraries it needs are there
(:mod:`envkit.gpu.cudalibs`), and whether it links against the torch beside it
(:func:`envkit.kernels.site_linkage`). Without a target it says which compute capabilities
the environment's core kernels run on. Each file is read once per run (``elf.FileCache``);
vLLM 0.8.5's environment (299 compiled modules, 7.6 GB) takes about a second cold.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from envkit import kernels
from envkit.findings import Finding, Severity
from envkit.gpu import cudalibs, elf, fatbin, modules
from envkit.gpu.arch import KNOWN, Capability, toolkits_for
from envkit.gpu.driver import DriverFit, DriverVersion, Gpu, fit, toolkit_driver
from envkit.gpu.images import Coverage, Images, images

CORE_VLLM = ("_C", "_moe_C", "_C_stable_libtorch", "_moe_C_stable_libtorch")
MAX_VERSION_FILE = 65_536


@dataclass(frozen=True)
class GpuTarget:
    """The GPU an environment is checked for."""

    capability: Capability
    name: str = ""
    driver: DriverVersion | None = None

    @classmethod
    def of(cls, gpu: Gpu) -> GpuTarget:
        return cls(gpu.capability, gpu.name, gpu.driver)

    def __str__(self) -> str:
        return f"{self.capability} ({self.name})" if self.name else str(self.capability)


class Role(str, Enum):
    CORE = "core"  # torch's CUDA libraries, vLLM's _C and _moe_C: without them nothing runs
    BACKEND = "backend"  # optional kernels (vllm_flash_attn, FlashMLA, xformers, flash-attn)
    LIBRARY = "library"  # NVIDIA's libraries: their CUDA dependencies are checked


@dataclass(frozen=True)
class ModuleReport:
    """One compiled file: its kernels and the CUDA libraries it lacks."""

    path: str  # relative to site-packages
    package: str
    role: Role
    images: Images | None  # None: no GPU code, or it could not be read (then `damaged`)
    damaged: str = ""  # why its ELF file or fatbin section could not be read
    coverage: Coverage | None = None  # on the target GPU, when there is one and kernels
    missing_cuda: tuple[cudalibs.Missing, ...] = ()


@dataclass(frozen=True)
class GpuReport:
    """What :func:`assess` found; ``findings`` are for people, the rest for programs."""

    site_packages: str
    target: GpuTarget | None
    torch_cuda: str  # torch.version.cuda as torch/version.py says it ('' when unknown)
    modules: tuple[ModuleReport, ...]
    cuda: cudalibs.Provided
    linkage: kernels.SiteLinkage | None
    runs_on: tuple[Capability, ...]  # where every core module has kernel images
    findings: tuple[Finding, ...]
    files_read: int
    seconds: float

    @property
    def ok(self) -> bool:
        return not any(f.severity is Severity.ERROR for f in self.findings)

    @property
    def packages(self) -> tuple[str, ...]:
        return tuple(sorted({m.package for m in self.modules}))


def assess(site_packages: Path, target: GpuTarget | None = None) -> GpuReport:
    """The GPU side of the environment at ``site_packages`` for ``target`` (or, with None,
    which GPUs it can run on). Never raises on what the files hold: damaged ones become
    findings."""
    started = time.monotonic()
    cache = elf.FileCache()
    env = cudalibs.provided(site_packages, cache)
    walk = modules.extension_modules(site_packages, cache)
    torch_libs = modules.torch_libraries(site_packages, cache)
    nvidia = _nvidia_libraries(site_packages, cache)
    chosen = [
        *((m, Role.CORE) for m in torch_libs),
        *((m, _role(m)) for m in walk.modules if m.links_torch or _needs_cuda(m)),
        *((m, Role.LIBRARY) for m in nvidia),
    ]
    reports = tuple(_module(m, role, env, target, cache) for m, role in chosen)
    linked = kernels.site_linkage(site_packages, cache)
    core = [r.images for r in reports if r.role is Role.CORE and r.images is not None]
    runs_on = tuple(c for c in KNOWN if all(i.on(c).verdict.runs for i in core)) if core else ()
    torch_cuda = _torch_cuda(site_packages)
    found = [
        *_image_findings(reports, target, runs_on, bool(core)),
        *_cuda_findings(reports),
        *_linkage_findings(linked),
        *_driver_findings(target, torch_cuda),
    ]
    if walk.truncated:
        found.append(_note("gpu-check-truncated", f"only part was checked: {walk.truncated}"))
    return GpuReport(
        site_packages=str(site_packages),
        target=target,
        torch_cuda=torch_cuda,
        modules=reports,
        cuda=env,
        linkage=linked,
        runs_on=runs_on,
        findings=tuple(found),
        files_read=cache.reads,
        seconds=round(time.monotonic() - started, 3),
    )


def _role(module: modules.Module) -> Role:
    stem = module.relative.rsplit("/", 1)[-1].split(".")[0]
    if module.package == "vllm" and module.relative.count("/") == 1 and stem in CORE_VLLM:
        return Role.CORE
    return Role.BACKEND


def _needs_cuda(module: modules.Module) -> bool:
    facts = module.dynamic
    return isinstance(facts, elf.Dynamic) and any(cudalibs.classify(n) for n in facts.needed)


def _nvidia_libraries(site_packages: Path, cache: elf.FileCache) -> list[modules.Module]:
    found = []
    for folder in cudalibs.library_folders(site_packages):
        if folder.relative_to(site_packages).parts[0] != "nvidia":
            continue
        for path in sorted(folder.iterdir())[: cudalibs.MAX_LIBRARY_FILES]:
            if ".so" in path.name and path.is_file():
                relative = path.relative_to(site_packages).as_posix()
                found.append(modules.Module(path, relative, "nvidia", cache.get(path, elf.dynamic)))
    return found


def _module(
    module: modules.Module,
    role: Role,
    env: cudalibs.Provided,
    target: GpuTarget | None,
    cache: elf.FileCache,
) -> ModuleReport:
    facts = module.dynamic
    if isinstance(facts, elf.Unreadable):
        return ModuleReport(module.relative, module.package, role, None, damaged=str(facts))
    gone = cudalibs.missing(module.relative, facts.needed, env, module.path.parent)
    if role is Role.LIBRARY:
        return ModuleReport(module.relative, module.package, role, None, missing_cuda=gone)
    read = cache.get(module.path, fatbin.read)
    if isinstance(read, fatbin.Damaged):
        return ModuleReport(
            module.relative, module.package, role, None, damaged=str(read), missing_cuda=gone
        )
    held = images(read) if read is not None and read.containers else None
    coverage = held.on(target.capability) if held is not None and target is not None else None
    return ModuleReport(module.relative, module.package, role, held, "", coverage, gone)


def _torch_cuda(site_packages: Path) -> str:
    """torch.version.cuda, read from torch/version.py's text (never imported)."""
    try:
        with (site_packages / "torch" / "version.py").open("rb") as handle:
            text = handle.read(MAX_VERSION_FILE).decode("utf-8", "replace")
    except OSError:
        return ""
    match = re.search(r"^cuda(?:\s*:[^=\n]*)?\s*=\s*['\"]([0-9]{1,2}\.[0-9]{1,2})['\"]", text, re.M)
    return match.group(1) if match else ""


def _image_findings(
    reports: tuple[ModuleReport, ...],
    target: GpuTarget | None,
    runs_on: tuple[Capability, ...],
    has_core: bool,
) -> list[Finding]:
    found = [
        Finding(
            severity=Severity.WARNING,
            code="kernels-not-checked",
            message=f"{r.path}'s GPU code could not be read: {r.damaged}",
            where=r.path,
        )
        for r in reports
        if r.damaged and r.role is not Role.LIBRARY
    ]
    if target is None:
        if has_core:
            shown = ", ".join(map(str, runs_on)) or "none"
            found.append(
                Finding(
                    severity=Severity.INFO if runs_on else Severity.ERROR,
                    code="runs-on" if runs_on else "no-common-gpu",
                    message=f"the core kernels (torch's CUDA libraries, vLLM's _C and _moe_C) "
                    f"have images for compute capabilities: {shown}",
                    fix="" if runs_on else "install torch and vLLM builds made for the same GPUs",
                )
            )
        return found
    for r in reports:
        if r.images is None or r.coverage is None or r.coverage.verdict.runs:
            continue
        held = r.images.describe()
        if r.role is Role.CORE:
            found.append(
                Finding(
                    code="no-kernel-image",
                    message=f"{r.path} has no kernel image for compute capability {target} "
                    f"({r.coverage.describe()}; it holds {held}): its kernels fail with "
                    "'no kernel image is available for execution on the device'",
                    fix=f"install torch and vLLM builds compiled for {target.capability} "
                    f"({toolkits_for(target.capability) or 'no CUDA toolkit envkit knows'} "
                    "can compile for it)",
                    where=r.path,
                )
            )
        else:
            found.append(
                Finding(
                    severity=Severity.WARNING,
                    code="backend-without-kernels",
                    message=f"{r.path} (an optional backend) has no kernels for compute "
                    f"capability {target} (it holds {held}): another backend is used there",
                    where=r.path,
                )
            )
    return found


def _cuda_findings(reports: tuple[ModuleReport, ...]) -> list[Finding]:
    return [
        Finding(
            code="cuda-runtime-mismatch",
            message=gone.describe(),
            fix=f"install the CUDA {gone.needed.family.value} library of major "
            f"{gone.needed.major} the module was built for, or builds of torch and its "
            "kernels made for the same CUDA (envkit build PROFILE)",
            where=gone.module,
        )
        for r in reports
        for gone in r.missing_cuda
    ]


def _linkage_findings(linked: kernels.SiteLinkage | None) -> list[Finding]:
    found = []
    for package in linked.packages if linked is not None else ():
        if package.missing:
            where, symbol = package.missing[0]
            more = f" and {len(package.missing) - 1} more" if len(package.missing) > 1 else ""
            found.append(
                Finding(
                    code="kernels-do-not-link",
                    message=f"{where} needs {symbol}{more}, which no library in torch/lib "
                    f"defines ({package.symbols} torch symbols checked in "
                    f"{len(package.modules)} modules of {package.package})",
                    fix=f"install the torch version {package.package} was built against",
                    where=where,
                )
            )
        for where, why in package.unreadable:
            found.append(_note("kernels-not-checked", f"{where} could not be read: {why}", where))
    return found


def _driver_findings(target: GpuTarget | None, torch_cuda: str) -> list[Finding]:
    if target is None or target.driver is None or not torch_cuda:
        return []
    how = fit(target.driver, torch_cuda)
    needed = toolkit_driver(torch_cuda)
    if how is DriverFit.TOO_OLD:
        return [
            Finding(
                code="driver-too-old",
                message=f"driver {target.driver} cannot run torch's CUDA {torch_cuda} runtime "
                f"(it needs {needed} or, with fewer features, the CUDA "
                f"{torch_cuda.split('.')[0]} branch's oldest driver)",
                fix=f"install NVIDIA driver {needed} or newer, or a torch build for an older CUDA",
            )
        ]
    if how is DriverFit.MINOR_COMPAT:
        return [
            _note(
                "driver-older-than-toolkit",
                f"driver {target.driver} is older than CUDA {torch_cuda}'s {needed}: it runs "
                "through minor version compatibility, without PTX built by the newer toolkit",
            )
        ]
    return []


def _note(code: str, message: str, where: str = "") -> Finding:
    return Finding(severity=Severity.WARNING, code=code, message=message, where=where)
