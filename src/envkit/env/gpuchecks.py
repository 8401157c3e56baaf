"""verify's and build's checks of the GPU layer: the environment's compiled modules read once
(:func:`envkit.gpu.installed.assess.assess`); its results are verify's checks as it made them
(their fixes naming the rebuild), with a pass for each part that holds.

- ``kernels`` (one per package whose modules link torch): every torch symbol (C++ and the
  stable C ABI) its modules need is defined in ``torch/lib``; the check says how many modules
  and symbols were checked.
- ``gpu`` (``kernel images``): with a target, every core module (torch's CUDA libraries,
  vLLM's ``_C`` and ``_moe_C``) has an image for its compute capability, and optional kernels
  without one are a warning; without a target, which GPUs the core kernels run on
  (information, a pass).
- ``cuda``: every CUDA library a module needs is in the environment, in its major.
- ``driver``: the target's driver runs torch's CUDA runtime (with a driver known), as
  :func:`envkit.gpu.installed.verdicts.driver` decides it (doctor reads the same result).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from envkit.env.checks import KIND, GpuSide, check
from envkit.gpu.installed.assess import GpuReport, assess
from envkit.gpu.installed.detect import Choice, examples
from envkit.gpu.roles import Role
from envkit.gpu.target import GpuTarget
from envkit.io import interrupts
from envkit.io.escaping import shell_command
from envkit.results import Result, Severity
from envkit.wording import agree, counted


def site_packages(sys_path: Iterable[str], prefix: str) -> Path | None:
    """The site-packages holding torch (else vLLM) among ``sys_path``, inside ``prefix`` when
    one is; None when neither is installed."""
    entries = [Path(e) for e in sys_path if e]
    for marker in (Path("torch") / "lib", Path("vllm") / "__init__.py"):
        found = [e for e in entries if (e / marker).exists()]
        own = [
            e for e in found if os.path.realpath(e).startswith(os.path.realpath(prefix) + os.sep)
        ]
        if own or found:
            return (own or found)[0]
    return None


def read_ahead(venv: Path, target: GpuTarget | None) -> Callable[[Path], GpuReport]:
    """Start the GPU layer's look (:func:`assess`) at the site-packages ``venv`` most likely
    has (``lib*/python*/site-packages`` holding torch, else vLLM) in a thread, while the probe
    imports vLLM in the venv's interpreter: the probe is a child process, so reading the ELF
    files here uses the other core. The function returned gives the report for the folder the
    probe found: the one read ahead when it is that folder (an error raised there is raised
    again), else a look at that folder then. The verdicts are the same either way."""
    real = os.path.realpath(venv)
    entries = sorted({os.path.realpath(e) for e in Path(real).glob("lib*/python*/site-packages")})
    guess = site_packages(entries, real)
    if guess is None:
        return lambda site: assess(site, target)
    done: dict[str, GpuReport | BaseException] = {}

    def look() -> None:
        try:
            done["report"] = assess(guess, target)
        except BaseException as exc:  # raised again in the thread that asks for it
            done["report"] = exc

    thread = interrupts.thread(look, "envkit-gpu-read-ahead")
    thread.start()

    def report(site: Path) -> GpuReport:
        if site != guess:
            return assess(site, target)
        thread.join()
        found = done["report"]
        if isinstance(found, BaseException):
            raise found
        return found

    return report


def gpu_side(report: GpuReport, source: str) -> GpuSide:
    """What the GPU layer was checked for, for verify's and doctor's JSON ``gpu``."""
    target = report.target
    return GpuSide(
        capability=str(target.capability) if target else "",
        name=target.name if target else "",
        driver=str(target.driver) if target and target.driver else "",
        source=source,
        runs_on=tuple(map(str, report.runs_on)),
        torch_cuda=report.torch_cuda,
        files_read=report.files_read,
        files_remembered=report.files_remembered,
    )


def reading(choice: Choice) -> str:
    """The progress line of the GPU layer's look ("checking": what it read of a file that
    is unchanged since an earlier look is not read again, envkit.gpu.installed.remembered)."""
    aim = f" for compute capability {choice.target}" if choice.target else ""
    return f"checking the compiled modules' GPU code and symbols{aim} (ELF files)"


def gpu_checks(
    site: Path,
    choice: Choice,
    profile: str,
    *,
    built: bool = False,
    look: Callable[[Path], GpuReport] | None = None,
) -> tuple[list[Result], GpuReport]:
    """The GPU layer's checks of the environment at ``site`` for ``choice``'s target: its
    results as it made them (each fix naming the rebuild), and a pass for each part that
    holds; ``built``: the environment is the one ``envkit build`` has just made, so no fix
    says to build it again; ``look``: where the GPU layer's report comes from
    (:func:`read_ahead`), else it is read here."""
    report = look(site) if look is not None else assess(site, choice.target)
    said_apart = ("runs-on", "no-common-gpu")  # without a target: one check below says it
    checks = [
        _with_rebuild(f, profile, choice.target, built)
        for f in report.findings
        if f.code in KIND and f.code not in said_apart
    ]
    failing = {KIND[c.code] for c in checks if c.severity > Severity.INFO}
    if report.linkage is not None:
        for package in report.linkage.packages:
            if package.links and package.modules:
                checks.append(
                    check(
                        kind="kernels",
                        name=package.package,
                        status=Severity.OK,
                        expected="links against torch",
                        found=f"{counted(len(package.modules), 'module')} "
                        f"{agree(len(package.modules), 'needs', 'need')} "
                        f"{counted(package.symbols, 'torch symbol')} (C++ and stable C ABI); "
                        f"torch defines {agree(package.symbols, 'it', 'them all')}",
                    )
                )
    core = [m for m in report.modules if m.role is Role.CORE and m.images is not None]
    target = choice.target
    if target is not None and core and "gpu" not in failing:
        checks.append(
            check(
                kind="gpu",
                name="kernel images",
                status=Severity.OK,
                expected=f"images for compute capability {target}",
                found=f"{counted(len(core), 'core module')} {agree(len(core), 'has', 'have')} "
                f"them (the GPU: {choice.source})",
            )
        )
    if core and target is None:
        checks.append(_runs_on(report))
    needed = sorted({g.needed.soname for m in report.modules for g in m.missing_cuda})
    if not needed and any(m.images is not None for m in report.modules):
        held = sorted({lib.soname for lib, _ in report.cuda.libraries})
        checks.append(
            check(
                kind="cuda",
                name="cuda libraries",
                status=Severity.OK,
                expected="every CUDA library the modules need",
                found=f"present ({len(held)} in the environment)",
            )
        )
    return checks, report


def _runs_on(report: GpuReport) -> Result:
    shown = "; ".join(
        f"{c} ({names})" if (names := examples(c, 2)) else str(c) for c in report.runs_on
    )
    return check(
        kind="gpu",
        name="kernel images",
        status=Severity.OK if report.runs_on else Severity.ERROR,
        expected="images for the GPU (none named: --gpu, --compute-capability, or nvidia-smi)",
        found=f"core kernels run on {shown}"
        if shown
        else "no GPU has images for every core module",
        fix="" if report.runs_on else "install torch and vLLM builds made for the same GPUs",
    )


def _with_rebuild(
    result: Result, profile: str, target: GpuTarget | None, built: bool = False
) -> Result:
    """The GPU layer's result with its fix naming the profile's rebuild (and, for a missing
    kernel image, the releases that have one)."""
    if result.severity <= Severity.INFO:
        return replace(result, fix="")
    fix = result.fix
    rebuild = shell_command(["envkit", "build", profile])
    if result.code == "no-kernel-image" and target is not None:
        # the published builds' table: read only when a kernel image is missing
        from envkit.gpu.published.profilefit import releases_said

        fix += releases_said(target.capability)
    if result.code == "cuda-runtime-mismatch" and result.severity is Severity.WARNING:
        # a module vLLM never loads: nothing to do unless it is imported. After a build,
        # that build is what a rebuild would make again; an existing venv may have drifted
        if not built:
            fix = f"{fix}; or, if it was installed after the build, rebuild: {rebuild}"
    elif result.code in ("no-kernel-image", "cuda-runtime-mismatch", "kernels-do-not-link"):
        fix = f"{fix}; then rebuild: {rebuild}"
    return replace(result, fix=fix)
