"""One look at an environment's GPU side, from its files alone (no GPU needed).

:func:`assess` reads a site-packages once: torch's own libraries (``torch/lib``), every
extension module that links torch or needs a CUDA library, and NVIDIA's libraries; and
answers, per package and module, whether its kernels have images for the target GPU
(:mod:`envkit.gpu.binaries.images`), whether the CUDA libraries it needs are there
(:mod:`envkit.gpu.binaries.cudalibs`), and whether it links against the torch beside it
(:func:`envkit.gpu.installed.linkage.site_linkage`). Without a target it says which compute
capabilities the environment's core kernels run on. The answer is a
:class:`~envkit.gpu.installed.report.GpuReport` with its findings
(:mod:`envkit.gpu.installed.verdicts`). Each file is read once per run (``FileCache``), and
what was read of a file is kept for the next look while the file is the same one
(:mod:`envkit.gpu.installed.remembered`): vLLM 0.8.5's environment (418 files read of 302
compiled modules, 7.6 GB) takes 0.11 s of CPU, 0.045 s with nothing to read again.
"""

from __future__ import annotations

import time
from pathlib import Path

from envkit.gpu.arch import KNOWN
from envkit.gpu.binaries import cudalibs, elf, fatbin
from envkit.gpu.binaries.filecache import FileCache
from envkit.gpu.binaries.images import of_file
from envkit.gpu.installed import modules, remembered, verdicts
from envkit.gpu.installed.report import GpuReport, ModuleReport
from envkit.gpu.roles import CORE_TORCH, CORE_VLLM, Role
from envkit.gpu.target import GpuTarget

__all__ = ["GpuReport", "ModuleReport", "assess"]


def assess(site_packages: Path, target: GpuTarget | None = None) -> GpuReport:
    """The GPU side of the environment at ``site_packages`` for ``target`` (or, with None,
    which GPUs it can run on). Never raises on what the files hold: damaged ones become
    findings."""
    started = time.monotonic()
    known = remembered.load(site_packages)
    cache = remembered.file_cache(site_packages, known)
    env = cudalibs.provided(site_packages, cache)
    walk = modules.extension_modules(site_packages, cache)
    torch_libs = modules.torch_libraries(site_packages, cache)
    nvidia = _nvidia_libraries(site_packages, cache)
    chosen = [
        *((m, Role.CORE if m.path.name in CORE_TORCH else Role.OPTIONAL) for m in torch_libs),
        *((m, _role(m)) for m in walk.modules if m.links_torch or _needs_cuda(m)),
        *((m, Role.LIBRARY) for m in nvidia),
    ]
    reports = tuple(_module(m, role, env, target, cache) for m, role in chosen)
    linked, inputs, fresh = remembered.site_linkage(site_packages, walk, cache, known)
    remembered.save(site_packages, cache, known, inputs, linked, linkage_read=fresh)
    core = [r.images for r in reports if r.role is Role.CORE and r.images is not None]
    runs_on = tuple(c for c in KNOWN if all(i.on(c).verdict.runs for i in core)) if core else ()
    torch_cuda = modules.torch_release(site_packages).cuda
    found = [
        *verdicts.images(reports, target, runs_on),
        *verdicts.cuda(reports),
        *verdicts.linkage_findings(linked),
        *verdicts.driver(target, torch_cuda),
    ]
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
        files_remembered=cache.recalled,
        seconds=round(time.monotonic() - started, 3),
    )


def _role(module: modules.Module) -> Role:
    stem = module.relative.rsplit("/", 1)[-1].split(".")[0]
    if module.package == "vllm" and module.relative.count("/") == 1 and stem in CORE_VLLM:
        return Role.CORE
    return Role.OPTIONAL


def _needs_cuda(module: modules.Module) -> bool:
    facts = module.links
    return isinstance(facts, elf.Links) and any(cudalibs.classify(n) for n in facts.needed)


def _nvidia_libraries(site_packages: Path, cache: FileCache) -> list[modules.Module]:
    found = []
    for folder in cudalibs.library_folders(site_packages):
        if folder.relative_to(site_packages).parts[0] != "nvidia":
            continue
        for path in sorted(folder.iterdir())[: cudalibs.MAX_LIBRARY_FILES]:
            if ".so" in path.name and path.is_file():
                relative = path.relative_to(site_packages).as_posix()
                found.append(modules.Module(path, relative, "nvidia", cache.get(path, elf.links)))
    return found


def _module(
    module: modules.Module,
    role: Role,
    env: cudalibs.Provided,
    target: GpuTarget | None,
    cache: FileCache,
) -> ModuleReport:
    facts = module.links
    if isinstance(facts, elf.Unreadable):
        return ModuleReport(module.relative, module.package, role, None, damaged=str(facts))
    gone = cudalibs.missing(module.relative, facts.needed, env, module.path.parent)
    if role is Role.LIBRARY:
        return ModuleReport(module.relative, module.package, role, None, missing_cuda=gone)
    held = cache.get(module.path, of_file)
    if isinstance(held, fatbin.Damaged):
        return ModuleReport(
            module.relative, module.package, role, None, damaged=str(held), missing_cuda=gone
        )
    coverage = held.on(target.capability) if held is not None and target is not None else None
    return ModuleReport(
        module.relative, module.package, role, held, "", coverage, gone, module.links_torch
    )
