"""What a fix is built from and what it says: the :class:`Context` (the log's facts, envkit's
knowledge, the environment asked about) and the :class:`Fix` (summary, meaning, steps, the
arithmetic and facts behind them, the envkit commands to run next)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from envkit.serving.envpins import Installed
from envkit.serving.knowledge import GpuFacts, Knowledge, ProfileFacts, pinning
from envkit.serving.logfacts import Facts
from envkit.serving.signatures import Code
from envkit.serving.watch import Hit, Scan


@dataclass(frozen=True)
class Fix:
    summary: str  # what the log says happened, in one line
    meaning: str  # what it means
    steps: tuple[str, ...]  # what to do, commands where there are some
    details: tuple[str, ...] = ()  # the arithmetic and facts the steps were built from
    next: tuple[str, ...] = ()  # envkit commands to run next


@dataclass(frozen=True)
class Context:
    facts: Facts
    knowledge: Knowledge
    scan: Scan
    installed: Installed | None = None
    profile: str = ""  # --profile, when given

    @property
    def vllm(self) -> str:
        return self.facts.vllm_version or (self.installed.get("vllm") if self.installed else "")

    @property
    def model(self) -> str:
        return self.facts.model or "MODEL"

    def pinned(self) -> list[ProfileFacts]:
        return pinning(self.knowledge, self.vllm) if self.vllm else []

    def profile_name(self) -> str:
        """The profile to name in a suggested command."""
        if self.profile:
            return self.profile
        pinned = self.pinned()
        return pinned[0].name if pinned else "PROFILE"

    def gpus(self, extra: str = "") -> list[GpuFacts]:
        """The GPUs the log names that envkit knows, ``extra`` (a name a signature read)
        first."""
        found: list[GpuFacts] = []
        for name in (extra, *self.facts.gpu_names):
            gpu = self.knowledge.gpu(name) if name else None
            if gpu and gpu not in found:
                found.append(gpu)
        return found

    def gpu_details(self, extra: str = "") -> tuple[str, ...]:
        return tuple(f"GPU {g.describe()}" for g in self.gpus(extra))

    def arg(self, *names: str) -> str:
        for name in names:
            if value := self.facts.args.get(name):
                return value
        return ""


Builder = Callable[[tuple[Hit, ...], Context], Fix]


def first(hits: tuple[Hit, ...], key: str) -> str:
    """The first value a signature read for ``key`` in any of the hits."""
    return next((h.groups[key] for h in hits if key in h.groups), "")


def gib(value: float) -> str:
    return f"{value:.2f} GiB"


def profiles_text(names: list[str], knowledge: Knowledge) -> str:
    by_name: Mapping[str, ProfileFacts] = {p.name: p for p in knowledge.profiles()}
    return ", ".join(
        f"{n} (vLLM {by_name[n].vllm}, transformers {by_name[n].transformers})" for n in names
    )


def unknown_fix(code: Code) -> Builder:
    """For a code without a builder of its own (none should be left)."""

    def build(hits: tuple[Hit, ...], ctx: Context) -> Fix:
        return Fix(summary=hits[0].line.text if hits else code.value, meaning="", steps=())

    return build
