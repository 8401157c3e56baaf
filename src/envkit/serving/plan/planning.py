"""A memory plan for a profile and a model on a GPU: what ``envkit plan`` prints and what
``envkit serve`` starts vLLM with. One home for the assembly (the profile's verdict on the
model, the model's files, :func:`memory_plan.make_plan`), so the two never disagree.

The GPU comes from the user (``--gpu``, ``--gpu-memory``) or, for ``serve``, from
``nvidia-smi`` (:func:`gpu_from_nvidia_smi`); with none known, ``serve`` leaves vLLM's
defaults alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envkit.errors import BadInput
from envkit.gpu import cards
from envkit.io.escaping import shell_command
from envkit.profiles.profile import Profile
from envkit.serving.command import MmKwargs, MmLimits
from envkit.serving.plan import memory_plan
from envkit.serving.plan.memory_plan import Plan, PlanInput

if TYPE_CHECKING:
    from envkit.gpu.arch import Capability
    from envkit.gpu.published.profilefit import GpuCheck
    from envkit.models.check_model import Verdict

MIB = 1024**2


@dataclass(frozen=True)
class Gpu:
    """What the plan knows of the GPU, and where that came from (said to the user)."""

    memory: int
    free: int | None = None
    capability: tuple[int, int] | None = None
    source: str = ""
    options: tuple[str, ...] = ()  # the options that named it (none for nvidia-smi's)

    def plan_command(self, profile: str, model: str) -> str:
        """``envkit plan PROFILE MODEL`` for this GPU as the options gave it (nvidia-smi's
        is the one plan reads itself): the command a refusal points to."""
        return shell_command(["envkit", "plan", profile, model, *self.options])


@dataclass(frozen=True)
class Settings:
    """The vLLM settings asked for (``plan``'s options)."""

    utilization: float = 0.9
    max_model_len: int | None = None
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    reserve: int = cards.GIB
    mm_limits: MmLimits | None = None  # --limit-mm-per-prompt
    mm_kwargs: MmKwargs | None = None  # --mm-processor-kwargs
    revision: str | None = None


def gpu_from_options(
    card: cards.Card | None, memory: int | None, free: int | None, capability: Capability | None
) -> Gpu | None:
    """The GPU the options describe (``--gpu`` and/or ``--gpu-memory``, each parsed where it
    enters: ``cli.options``), None when they name none. Raises BadInput for ``--free`` alone."""
    if memory is None and card is None:
        if free is not None:
            raise BadInput("--free needs the GPU's total memory: --gpu NAME or --gpu-memory SIZE.")
        return None
    level = capability or (card.capability if card else None)
    given = (
        ("--gpu", card.key)
        if card and memory is None
        else ("--gpu-memory", f"{(memory or 0) / cards.GIB:.2f}GiB")
    )
    return Gpu(
        memory=memory if memory is not None else card.memory if card else 0,
        free=free,
        capability=(level.major, level.minor) if level else None,
        source=" ".join(given),
        options=given,
    )


def gpu_from_nvidia_smi() -> Gpu | None:
    """The first visible GPU as nvidia-smi reports it (total and free memory, compute
    capability), or None without nvidia-smi or a GPU it can read."""
    from envkit.gpu.installed.detect import smi

    card = smi().visible()
    if card is None or card.memory is None or card.free is None:
        return None  # "[N/A]" and the like: nothing to plan with
    total, free = card.memory, card.free
    if not 0 < total <= cards.MAX_SIZE:
        return None
    return Gpu(
        memory=total,
        free=free,
        capability=(card.capability.major, card.capability.minor),
        source=f"nvidia-smi: {card.name}, {free / cards.GIB:.2f} of "
        f"{total / cards.GIB:.2f} GiB free",
    )


def plan_for(
    profile: Profile,
    model: str,
    gpu: Gpu,
    settings: Settings,
    progress: Callable[[str], None],
    *,
    known: Sequence[Profile] = (),
    gpu_check: GpuCheck | None = None,
) -> tuple[Plan, Profile, Verdict]:
    """The plan for ``model`` with ``profile``'s vLLM on ``gpu``, the profile as judged
    (its ``[models]`` table rescanned from its pins when stale) and its verdict on the
    model: a profile that cannot load the model gets a plan without a command, and its
    fixes name the ``known`` profiles that can (no release look-up here: new-profile does it).
    ``gpu_check`` (:func:`envkit.gpu.published.profilefit.checker`) adds whether the profile's
    builds have kernels for the GPU: a profile whose builds cannot run there gets no command.

    Raises BadInput (a bad config.json or setting) and NetworkError (a Hub repo id or a
    stale table that cannot be read).
    """
    from envkit.models import check_model
    from envkit.models.current import current_models, lazy_scanner

    # the verdict from the pinned releases, should the [models] table be stale
    scanner = lazy_scanner(None, progress)
    profile, _stale = current_models(profile, scanner)
    config = check_model.load_model_config(model, revision=settings.revision)
    folder = Path(model) if Path(model).is_dir() else Path(model).parent
    others = [current_models(p, scanner)[0] for p in known]
    verdict = check_model.report(config, profile, others, None, gpu=gpu_check).verdict
    assert verdict is not None  # a report on one profile carries its verdict
    inp = PlanInput(
        model=folder,
        gpu_memory=gpu.memory,
        free=gpu.free,
        utilization=settings.utilization,
        max_model_len=settings.max_model_len,
        dtype=settings.dtype,
        kv_cache_dtype=settings.kv_cache_dtype,
        reserve=settings.reserve,
        compute_capability=gpu.capability,
        load_problems=verdict.problems,
        mm_limits=settings.mm_limits,
        mm_kwargs=settings.mm_kwargs,
        vllm=profile.models.vllm,
    )
    return memory_plan.make_plan(config.raw, folder, model, inp), profile, verdict


def asked_args(settings: Settings, given: frozenset[str]) -> list[str]:
    """Without a plan (no GPU known): only the settings the user named (``given`` holds
    their names), as vllm serve flags; vLLM's own defaults for the rest."""
    if not 0 < settings.utilization <= 1:
        raise BadInput(f"--gpu-memory-utilization {settings.utilization} must be in (0, 1].")
    args: list[str] = []
    if "dtype" in given and settings.dtype != "auto":
        args += ["--dtype", settings.dtype]
    if "utilization" in given:
        args += ["--gpu-memory-utilization", f"{settings.utilization:.2f}"]
    if settings.max_model_len is not None:
        args += ["--max-model-len", str(settings.max_model_len)]
    if settings.kv_cache_dtype != "auto":
        args += ["--kv-cache-dtype", settings.kv_cache_dtype]
    if settings.mm_limits is not None:
        args += ["--limit-mm-per-prompt", settings.mm_limits.flag()]
    if settings.mm_kwargs is not None:
        args += ["--mm-processor-kwargs", json.dumps(settings.mm_kwargs.to_dict())]
    return args
