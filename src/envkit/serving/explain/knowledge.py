"""What ``explain`` knows besides the log: the shipped profiles' pins and what each loads,
GPU facts, and vision models' pixels per token. A small typed interface, so tests hand their
own tables and later GPU or compat facts plug in.

:class:`Knowledge` is the interface; :class:`Tables` holds the facts as plain frozen data;
:class:`ShippedKnowledge` reads them from envkit's catalog (the profiles on the search path,
their ``[models]`` tables) and :mod:`envkit.gpu.cards` the first time a fix asks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Protocol

from packaging.version import InvalidVersion, Version

if TYPE_CHECKING:
    from envkit.profiles.catalog import Catalog
    from envkit.profiles.profile import Profile


@dataclass(frozen=True)
class ProfileFacts:
    """One profile as explain uses it: its pins and what it loads."""

    name: str
    vllm: str
    transformers: str
    torch: str = ""
    cuda: str = ""  # the CUDA its torch build must report
    model_types: frozenset[str] = frozenset()
    architectures: frozenset[str] = frozenset()


@dataclass(frozen=True)
class GpuFacts:
    name: str  # envkit's key: rtx-2070
    memory: int  # bytes
    capability: tuple[int, int]

    @property
    def bfloat16(self) -> bool:
        return self.capability >= (8, 0)

    def describe(self) -> str:
        cc = ".".join(map(str, self.capability))
        return (
            f"{self.name}: {self.memory / 1024**3:.0f} GiB, compute capability {cc}, "
            f"bfloat16 {'yes' if self.bfloat16 else 'no (serve float16: --dtype half)'}"
        )


@dataclass(frozen=True)
class Patch:
    """How many pixels one vision token covers: (patch_size x merge_size)^2."""

    patch: int
    merge: int
    source: str  # where the numbers came from, said in the fix

    @property
    def pixels_per_token(self) -> int:
        return (self.patch * self.merge) ** 2


class Knowledge(Protocol):
    def profiles(self) -> tuple[ProfileFacts, ...]: ...

    def gpu(self, name: str) -> GpuFacts | None: ...

    def patch(self, model_type: str, architecture: str, model: str) -> Patch | None: ...


# Vision towers' patch and merge sizes by model type (the checkpoints' vision_config:
# Qwen2-VL and Qwen2.5-VL 14 x 2, Qwen3-VL and Qwen3.5 16 x 2), and the names they go by.
PATCHES: Mapping[str, tuple[int, int]] = {
    "qwen2_vl": (14, 2),
    "qwen2_5_vl": (14, 2),
    "qwen3_vl": (16, 2),
    "qwen3_vl_moe": (16, 2),
    "qwen3_5": (16, 2),
    "qwen3_5_moe": (16, 2),
}
_ARCH_TYPES = {
    "Qwen2VL": "qwen2_vl",
    "Qwen2_5_VL": "qwen2_5_vl",
    "Qwen3VLMoe": "qwen3_vl_moe",
    "Qwen3VL": "qwen3_vl",
    "Qwen3_5Moe": "qwen3_5_moe",
    "Qwen3_5": "qwen3_5",
}
_NAME_TYPES = (
    (re.compile(r"qwen2\.5-vl", re.I), "qwen2_5_vl"),
    (re.compile(r"qwen2-vl", re.I), "qwen2_vl"),
    (re.compile(r"qwen3-vl", re.I), "qwen3_vl"),
    (re.compile(r"qwen3\.5", re.I), "qwen3_5"),
)


def gpu_key(name: str) -> list[str]:
    """The table keys a GPU's printed name may go by, most specific first
    (``NVIDIA A100-SXM4-80GB`` -> ``a100-80gb``, ``a100``)."""
    words = re.split(r"[\s_-]+", name.strip().lower())
    drop = {"nvidia", "geforce", "tesla", "quadro", "sxm", "sxm2", "sxm4", "sxm5", "pcie", "nvl"}
    words = [w for w in words if w and w not in drop]
    return ["-".join(words[:n]) for n in range(len(words), 0, -1)]


@dataclass(frozen=True)
class Tables:
    """The facts as plain data (tests build their own)."""

    profile_facts: tuple[ProfileFacts, ...] = ()
    gpus: Mapping[str, GpuFacts] = field(default_factory=dict)
    patches: Mapping[str, tuple[int, int]] = field(default_factory=lambda: dict(PATCHES))

    def profiles(self) -> tuple[ProfileFacts, ...]:
        return self.profile_facts

    def gpu(self, name: str) -> GpuFacts | None:
        for key in gpu_key(name):
            if key in self.gpus:
                return self.gpus[key]
        return None

    def patch(self, model_type: str, architecture: str, model: str) -> Patch | None:
        if model_type in self.patches:
            return Patch(*self.patches[model_type], f"model type {model_type}")
        for prefix, kind in _ARCH_TYPES.items():
            if architecture.startswith(prefix) and kind in self.patches:
                return Patch(*self.patches[kind], f"architecture {architecture}")
        for pattern, kind in _NAME_TYPES:
            if pattern.search(model) and kind in self.patches:
                return Patch(*self.patches[kind], f"the model's name ({kind})")
        return None


def profile_facts(profile: Profile) -> ProfileFacts:
    pins = profile.expected_versions()
    models = profile.models
    return ProfileFacts(
        name=profile.name,
        vllm=models.vllm or pins.get("vllm", ""),
        transformers=models.transformers or pins.get("transformers", ""),
        torch=pins.get("torch", ""),
        cuda=profile.torch.cuda,
        model_types=frozenset(models.model_types) | frozenset(models.vllm_model_types),
        architectures=frozenset(models.architectures),
    )


class ShippedKnowledge:
    """The catalog's profiles and envkit's GPU table, read the first time they are asked."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    @cached_property
    def _tables(self) -> Tables:
        from envkit.gpu.cards import GPUS

        listing = self._catalog.list()
        return Tables(
            profile_facts=tuple(profile_facts(p) for p in listing.profiles),
            gpus={k: GpuFacts(k, mem, cc) for k, (mem, cc) in GPUS.items()},
        )

    def profiles(self) -> tuple[ProfileFacts, ...]:
        return self._tables.profiles()

    def gpu(self, name: str) -> GpuFacts | None:
        return self._tables.gpu(name)

    def patch(self, model_type: str, architecture: str, model: str) -> Patch | None:
        return self._tables.patch(model_type, architecture, model)


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def newest_first(profiles: tuple[ProfileFacts, ...]) -> list[ProfileFacts]:
    return sorted(profiles, key=lambda p: (_version(p.vllm) or Version("0"), p.name), reverse=True)


def pinning(knowledge: Knowledge, vllm: str) -> list[ProfileFacts]:
    """The profiles pinning this vLLM release (a local or dev suffix ignored)."""
    want = _version(vllm)
    if want is None:
        return []
    return [p for p in newest_first(knowledge.profiles()) if _version(p.vllm) == want]


def loading(knowledge: Knowledge, model_type: str = "", architecture: str = "") -> list[str]:
    """The profiles whose pins load this model type and architecture, newest vLLM first."""
    return [
        p.name
        for p in newest_first(knowledge.profiles())
        if (not model_type or model_type in p.model_types)
        and (not architecture or architecture in p.architectures)
    ]
