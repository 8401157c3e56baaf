"""The facts of an export from what envkit knows: the plan for the model on the GPU (the
same assembly ``envkit plan`` and ``envkit serve`` run, :func:`serving.plan.planning.plan_for`,
with the GPU layer's check of the profile's builds on that GPU), the lock cell as ``envkit
image`` reads it (:func:`image.spec.spec_for`), and the verdicts said in every file."""

from __future__ import annotations

from collections.abc import Callable

from envkit.deploy.export import ExportOptions, facts_for
from envkit.deploy.facts import ExportRefused, Facts
from envkit.gpu.target import GpuTarget
from envkit.image.spec import spec_for
from envkit.lock.torchsource import TorchIndex
from envkit.profiles.profile import Profile
from envkit.results import Result, Severity
from envkit.serving.command import serve_args
from envkit.serving.plan.planning import Gpu, Settings, plan_for


def planned(
    profile: Profile,
    model: str,
    gpu: Gpu,
    settings: Settings,
    target: GpuTarget | None,
    options: ExportOptions,
    *,
    cell: str | None,
    constraints: str | None,
    index: str | None,
    torch_index: TorchIndex,
    progress: Callable[[str], None],
) -> Facts:
    """The facts for ``model`` with ``profile`` on ``gpu``; ExportRefused (exit 1) when
    the plan has no command (the profile cannot load the model, or its builds have no
    kernels for the GPU), as ``envkit serve`` refuses to start."""
    from envkit.gpu.published import profilefit

    check = profilefit.checker(target) if target is not None else None
    plan, profile, verdict = plan_for(profile, model, gpu, settings, progress, gpu_check=check)
    if not plan.command:
        reasons = "; ".join(p.message for p in plan.problems if p.severity is Severity.ERROR)
        fixes = "; ".join(p.fix for p in plan.problems if p.fix)
        raise ExportRefused(
            f"envkit plan has no command for {model} with {profile.name} on this GPU "
            f"({gpu.source}): {reasons or 'see envkit plan'}. Nothing was written.",
            fixes or f"{gpu.plan_command(profile.name, str(model))} shows the numbers.",
        )
    spec = spec_for(
        profile, cell, constraints=constraints, index=index, torch_index=torch_index,
        runs="the exported files' environment",
    )  # fmt: skip
    args = serve_args(plan.recommended, settings.kv_cache_dtype)
    verdicts = (
        ("model", f"loadable as {verdict.architecture}" if verdict.ok else "not loadable"),
        ("plan", "fits as asked" if plan.ok else "fits as recommended: " + _codes(plan.problems)),
        ("gpu", _gpu_verdict(verdict.problems, target, gpu)),
    )
    return facts_for(
        spec,
        model,
        args,
        options,
        weights_bytes=plan.memory.weights,
        gpu_memory=gpu.memory,
        verdicts=verdicts,
    )


def _gpu_verdict(problems: tuple[Result, ...], target: GpuTarget | None, gpu: Gpu) -> str:
    """What the GPU check decided, read from the verdict's problems it added (a build
    without kernels for the GPU stopped the export before): kernels for the card, not known,
    or not checked without a compute capability."""
    source = gpu.source or "given"
    if target is None:
        return f"kernels not checked: no compute capability ({source})"
    if any(p.code == "kernels-not-known" for p in problems):  # profilefit.on_gpu's
        return f"kernels not known for compute capability {target.capability} ({source})"
    return f"kernels for compute capability {target.capability} ({source})"


def _codes(problems: tuple[Result, ...]) -> str:
    return ", ".join(sorted({p.code for p in problems})) or "none"
