"""What a fix is built from and what it says: the :class:`Context` (the log's facts, envkit's
knowledge, the environment asked about) and the :class:`Fix` (summary, meaning, steps, the
arithmetic and facts behind them, the envkit commands to run next)."""

from __future__ import annotations

import shlex
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from envkit.serving.explain.envpins import Installed
from envkit.serving.explain.knowledge import GpuFacts, Knowledge, ProfileFacts, pinning
from envkit.serving.explain.logfacts import Facts
from envkit.serving.explain.signatures import Code
from envkit.serving.explain.watch import Hit, Scan


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
    profile: str = ""  # --profile, or the profile serve ran
    venv: str = ""  # --venv, or the venv serve ran
    gpu: str = ""  # the --gpu serve was given
    passed: tuple[str, ...] = ()  # the vllm serve arguments envkit passed

    def given(self, flag: str) -> str | None:
        """The value of ``--flag`` that envkit passed or the log's dumps show (``None``
        when neither has it): a fix must not suggest it again as new."""
        for i, word in enumerate(self.passed):
            if word == flag:
                return self.passed[i + 1] if i + 1 < len(self.passed) else "true"
            if word.startswith(flag + "="):
                return word[len(flag) + 1 :]
        value = self.facts.args.get(flag.lstrip("-").replace("-", "_"))
        return value if value else None

    def build(self, profile: str = "") -> str:
        """``envkit build PROFILE [--venv VENV]``: the profile and venv in use."""
        words = ["envkit", "build", profile or self.profile_name()]
        if self.venv:
            words += ["--venv", self.venv]
        return shlex.join(words)

    def uv_python(self) -> str:
        """``--python VENV `` for a uv pip command, when a venv is in use."""
        return f"--python {shlex.quote(self.venv)} " if self.venv else ""

    def venv_words(self) -> str:
        return f" --venv {shlex.quote(self.venv)}" if self.venv else ""

    def gpu_option(self, total_gib: float | None = None) -> str:
        """How a suggested plan names the GPU: serve's --gpu, a GPU the log names, the
        total memory the log prints; else a placeholder."""
        if self.gpu:
            return f"--gpu {shlex.quote(self.gpu)}"
        gpus = self.gpus()
        if gpus:
            return f"--gpu {gpus[0].name}"
        if total_gib:
            return f"--gpu-memory {total_gib:g}GiB"
        return "--gpu-memory SIZE"

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


def port_free(port: int) -> bool:
    """Whether ``port`` can be bound on 127.0.0.1 now (the only address ever tried; the
    socket is closed at once)."""
    if not 0 < port < 65536:
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_after(port: int, tries: int = 20) -> int | None:
    """The first port above ``port`` that binds on 127.0.0.1 (None when none of ``tries``)."""
    return next((p for p in range(port + 1, port + 1 + tries) if port_free(p)), None)


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
