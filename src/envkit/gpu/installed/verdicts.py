"""The findings of the GPU layer's look at an environment, from what it read: one sentence
each with the evidence, the fix where there is one, and the file it concerns."""

from __future__ import annotations

from envkit.gpu.arch import Capability, toolkits_for
from envkit.gpu.binaries import cudalibs
from envkit.gpu.driver import DriverFit, fit, toolkit_driver
from envkit.gpu.installed.linkage import SiteLinkage
from envkit.gpu.installed.report import ModuleReport
from envkit.gpu.roles import Role
from envkit.gpu.target import GpuTarget
from envkit.results import Result, Severity
from envkit.wording import counted

NO_IMAGE = "'no kernel image is available for execution on the device'"


def images(
    reports: tuple[ModuleReport, ...], target: GpuTarget | None, runs_on: tuple[Capability, ...]
) -> list[Result]:
    """Kernel images: per core module without one (an error), per package of optional
    kernels without one (a warning), or with no target which GPUs the core kernels run on."""
    found = [
        _warning(
            "kernels-not-checked", f"{r.path}'s GPU code could not be read: {r.damaged}", r.path
        )
        for r in reports
        if r.damaged and r.role is not Role.LIBRARY
    ]
    if target is None:
        if any(r.role is Role.CORE and r.images is not None for r in reports):
            shown = ", ".join(map(str, runs_on)) or "none"
            found.append(
                Result(
                    severity=Severity.INFO if runs_on else Severity.ERROR,
                    code="runs-on" if runs_on else "no-common-gpu",
                    message="the core kernels (torch's libtorch_cuda, vLLM's _C and _moe_C) "
                    f"have images for compute capabilities: {shown}",
                    fix="" if runs_on else "install torch and vLLM builds made for the same GPUs",
                )
            )
        return found
    lacking = [r for r in reports if r.coverage is not None and not r.coverage.verdict.runs]
    found.extend(_no_image(r, target) for r in lacking if r.role is Role.CORE)
    packages = sorted({r.package for r in lacking if r.role is Role.OPTIONAL})
    for package in packages:
        mine = [r for r in lacking if r.package == package and r.role is Role.OPTIONAL]
        first = mine[0]
        more = f" and {len(mine) - 1} more of {package}'s modules" if len(mine) > 1 else ""
        held = first.images.describe() if first.images is not None else ""
        found.append(
            _warning(
                "backend-without-kernels",
                f"{first.path}{more} (optional kernels) have no image for compute capability "
                f"{target} ({first.path} holds {held}): what needs them does not run on this "
                "GPU; vLLM chooses other kernels where it has them",
                first.path,
            )
        )
    return found


def _no_image(report: ModuleReport, target: GpuTarget) -> Result:
    assert report.images is not None and report.coverage is not None
    able = toolkits_for(target.capability) or "no CUDA toolkit envkit knows"
    return Result(
        severity=Severity.ERROR,
        code="no-kernel-image",
        message=f"{report.path} has no kernel image for compute capability {target}, "
        f"sm_{target.capability.sm} "
        f"({report.coverage.describe()}; it holds {report.images.describe()}): its kernels "
        f"fail with {NO_IMAGE}",
        fix=f"install torch and vLLM builds compiled for {target.capability} ({able} can "
        "compile for it)",
        subject=report.path,
    )


def cuda(reports: tuple[ModuleReport, ...]) -> list[Result]:
    """A CUDA library that modules need and the environment does not hold: one finding per
    package and library, naming the first module and how many more there are."""
    groups: dict[tuple[str, str], list[cudalibs.Missing]] = {}
    loaded: set[tuple[str, str]] = set()  # groups with a module vLLM's start-up loads
    for report in reports:
        for gone in report.missing_cuda:
            key = (report.package, gone.needed.soname)
            groups.setdefault(key, []).append(gone)
            if report.loaded_with_vllm:
                loaded.add(key)
    found = []
    for (package, soname), lacking in groups.items():
        first = lacking[0]
        count = len(lacking) - 1
        more = f" (and {count} more of {package}'s modules)" if count else ""
        alone = (package, soname) not in loaded
        found.append(
            Result(
                severity=Severity.WARNING if alone else Severity.ERROR,
                code="cuda-runtime-mismatch",
                message=first.describe()
                + more
                + (
                    f" ({package} does not link torch, so vLLM does not load it: it fails only "
                    "where something imports it)"
                    if alone
                    else ""
                ),
                fix=(
                    f"no action is needed unless something imports {package} (vLLM does not); "
                    f"to use it, install the {first.needed.family.value} library "
                    f"{first.needed.soname} comes from, or a {package} build made for the CUDA "
                    "torch brings"
                    if alone
                    else f"install the {first.needed.family.value} library "
                    f"{first.needed.soname} comes from, or builds of torch and its kernels "
                    "made for the same CUDA (envkit build PROFILE)"
                ),
                subject=first.module,
            )
        )
    return found


def linkage_findings(linked: SiteLinkage | None) -> list[Result]:
    """Per package whose modules need torch symbols torch/lib lacks; once per file that
    could not be read."""
    found: list[Result] = []
    said: set[tuple[str, str]] = set()
    for package in linked.packages if linked is not None else ():
        if package.missing:
            where, symbol = package.missing[0]
            more = f" and {len(package.missing) - 1} more" if len(package.missing) > 1 else ""
            found.append(
                Result(
                    severity=Severity.ERROR,
                    code="kernels-do-not-link",
                    message=f"{where} needs {symbol}{more}, which no library in torch/lib "
                    f"defines ({counted(package.symbols, 'torch symbol')} checked in "
                    f"{counted(len(package.modules), 'module')} of {package.package})",
                    fix=f"install the torch version {package.package} was built against",
                    subject=where,
                )
            )
        for where, why in package.unreadable:
            if (where, why) not in said:
                said.add((where, why))
                found.append(_warning("kernels-not-checked", f"{where}: {why}", where))
    if linked is not None and linked.truncated:
        found.append(_warning("gpu-check-truncated", f"only part was checked: {linked.truncated}"))
    return found


def driver(target: GpuTarget | None, torch_cuda: str) -> list[Result]:
    """The target's driver against the CUDA runtime torch was built for: the one place this
    is decided (verify, build and doctor read it); ``ok`` when it runs it fully, nothing
    when there is no driver or CUDA to compare."""
    if target is None or target.driver is None or not torch_cuda:
        return []
    how = fit(target.driver, torch_cuda)
    needed = toolkit_driver(torch_cuda)
    evidence = {"expected": f"runs CUDA {torch_cuda} (driver {needed}+)",
                "found": f"driver {target.driver}"}  # fmt: skip
    if how is DriverFit.TOO_OLD:
        return [
            Result(
                severity=Severity.ERROR,
                code="driver-too-old",
                subject="driver",
                message=f"driver {target.driver} cannot run torch's CUDA {torch_cuda} runtime "
                f"(it needs {needed} or, with fewer features, the CUDA "
                f"{torch_cuda.split('.')[0]} branch's oldest driver)",
                evidence=evidence,
                fix=f"install NVIDIA driver {needed} or newer, or a torch build for an older CUDA",
            )
        ]
    if how is DriverFit.MINOR_COMPAT:
        return [
            Result(
                severity=Severity.WARNING,
                code="driver-older-than-toolkit",
                subject="driver",
                message=f"driver {target.driver} is older than CUDA {torch_cuda}'s {needed}: it "
                "runs through minor version compatibility, without PTX built by the newer "
                "toolkit",
                evidence=evidence,
            )
        ]
    return [Result(severity=Severity.OK, code="driver-fits", subject="driver",
                   message=f"driver {target.driver} runs torch's CUDA {torch_cuda} runtime",
                   evidence=evidence)]  # fmt: skip


def _warning(code: str, message: str, where: str = "") -> Result:
    return Result(severity=Severity.WARNING, code=code, message=message, subject=where)
