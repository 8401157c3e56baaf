"""What ``envkit compat`` answers for one vLLM x transformers pair, and its per-pair cache
(through ``io.cache``: every entry validated on read).

A finding (:class:`Incompatibility`) is what breaks, where vLLM uses it and what it breaks:
vLLM as a whole, or only some architectures or model types. The report adds what vLLM's own
requirement says of the pair (:class:`Declared`): inside the declared range, or outside with
the requirement an installer enforces. That is no run-time finding, so it never changes
``compatible``; it says that no installer picks the pair without an override.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from envkit.io.cache import COMPAT, Fields
from envkit.io.urls import index_key
from envkit.results import Result, Severity, listing


class Code(str, Enum):
    MISSING_MODULE = "missing-module"
    MISSING_NAME = "missing-name"
    REMOVED_ATTRIBUTE = "removed-attribute"  # the checked release is newer than the reference
    MISSING_ATTRIBUTE = "missing-attribute"  # older: vLLM reads what came later
    REGISTRATION_CLASH = "registration-clash"  # vLLM registers a name transformers owns
    CONFIG_CONFLICT = "config-conflict"  # a config field vLLM sets that the config class rejects
    REFUSED_RELEASE = "refused-release"  # vLLM raises on the release itself, at import time


@dataclass(frozen=True, kw_only=True)
class Incompatibility:
    code: Code
    name: str  # the module, the imported name, the attribute or the registered name
    module: str  # the transformers module it comes from ('' for attributes of unknown origin)
    file: str  # where vLLM uses it, inside the wheel
    line: int
    places: int = 1  # how many places in vLLM use it
    removed_in: str = ""  # the transformers release that removed it, when known
    taken_in: str = ""  # registration-clash: the first transformers release owning the name
    detail: str = ""  # what happens at run time, when the source says it (the error raised)
    # config-conflict: it fails only for a checkpoint whose config gives config_key one of these
    config_key: str = ""
    config_values: tuple[str, ...] = ()
    architectures: tuple[str, ...] = ()  # only these break...
    model_types: tuple[str, ...] = ()  # ...and these...
    # ...and the classes a lazy table loads by a name a checkpoint's config gives (vLLM's
    # processors: Cosmos3EdgeProcessor)...
    processors: tuple[str, ...] = ()
    # ...and checkpoints of a format the code tests for ("gguf checkpoint with mmproj");
    # none of the four: vLLM itself breaks
    conditions: tuple[str, ...] = ()

    def applies_to(self, config: Mapping[str, Any] | None) -> bool:
        """Whether the finding holds for a checkpoint with this ``config.json`` (a
        config-conflict holds only when a RoPE dict of it gives ``config_key`` one of
        ``config_values``); True when no config is given."""
        if not self.config_key or config is None:
            return True
        return any(
            isinstance(rope, Mapping) and rope.get(self.config_key) in self.config_values
            for rope in _rope_dicts(config)
        )

    @property
    def everywhere(self) -> bool:
        """It breaks vLLM as a whole (no architecture, model type, processor or checkpoint
        condition narrows it)."""
        return not (self.architectures or self.model_types or self.processors or self.conditions)

    @property
    def result(self) -> Result:
        """The finding as the one result record: an error when it breaks vLLM as a whole,
        a warning when it breaks only what it names; its evidence where vLLM uses it, what
        the source says happens there and what alone it breaks (the text is drawn from it)."""
        scope = (*self.architectures, *self.model_types, *self.processors, *self.conditions)
        facts = {"file": f"{self.file}:{self.line}", "module": self.module,
                 "places": str(self.places), "removed_in": self.removed_in,
                 "taken_in": self.taken_in, "detail": self.detail,
                 "architectures": listing(self.architectures),
                 "model_types": listing(self.model_types),
                 "processors": listing(self.processors),
                 "conditions": listing(self.conditions)}  # fmt: skip
        return Result(
            code=self.code.value,
            severity=Severity.ERROR if self.everywhere else Severity.WARNING,
            subject=self.name,
            message=f"{self.code.value} {self.name} at {self.file}:{self.line}"
            + (f": {self.detail}" if self.detail else "")
            + (f" (breaks only {', '.join(scope)})" if scope else ""),
            evidence={k: v for k, v in facts.items() if v},
        )

    def to_dict(self) -> dict[str, Any]:
        data = {**asdict(self), **self.result.to_dict()}
        data["code"] = self.code.value
        data["architectures"] = list(self.architectures)
        data["model_types"] = list(self.model_types)
        data["processors"] = list(self.processors)
        data["conditions"] = list(self.conditions)
        data["removed_in"] = self.removed_in or None
        data["taken_in"] = self.taken_in or None
        data["detail"] = self.detail or None
        data["config_key"] = self.config_key or None
        data["config_values"] = list(self.config_values)
        return data

    @classmethod
    def from_entry(cls, f: Fields) -> Incompatibility:
        """A finding as the cache holds it, every field checked (BadEntry otherwise)."""
        return cls(
            code=Code(f.text("code")),  # ValueError for a code envkit does not know
            name=f.text("name"),
            module=f.text("module"),
            file=f.text("file"),
            line=f.whole("line"),
            places=f.whole("places"),
            removed_in=f.text("removed_in", ""),
            taken_in=f.text("taken_in", ""),
            detail=f.text("detail", ""),
            config_key=f.text("config_key", ""),
            config_values=f.texts("config_values", ()),
            architectures=f.texts("architectures"),
            model_types=f.texts("model_types", ()),
            processors=f.texts("processors", ()),
            conditions=f.texts("conditions", ()),
        )


def _rope_dicts(config: Mapping[str, Any]) -> list[object]:
    """The RoPE dicts of a config.json: its own and its text config's."""
    found: list[object] = []
    for part in (config, config.get("text_config")):
        if isinstance(part, Mapping):
            found.extend(part.get(k) for k in ("rope_scaling", "rope_parameters"))
    return found


@dataclass(frozen=True, kw_only=True)
class Declared:
    """vLLM's own requirement on transformers, and whether the checked release is in it."""

    requirement: str  # transformers<5.21.0,>=5.16.1 ('' when vLLM declares none)
    inside: bool

    @classmethod
    def of(cls, specifier: str, transformers: Version) -> Declared:
        try:
            spec = SpecifierSet(specifier)
        except InvalidSpecifier:
            return cls(requirement=f"transformers{specifier}", inside=True)
        inside = spec.contains(transformers, prereleases=True)
        return cls(requirement=f"transformers{spec}" if str(spec) else "", inside=inside)

    def to_dict(self) -> dict[str, Any]:
        return {"requirement": self.requirement or None, "inside": self.inside}


@dataclass(frozen=True, kw_only=True)
class CompatReport:
    vllm: str
    transformers: str
    reference: str  # the transformers release vLLM was released against ('' when unknown)
    findings: tuple[Incompatibility, ...]
    declared: Declared = Declared(requirement="", inside=True)
    imports_checked: int = 0
    undecided: tuple[str, ...] = ()  # what source cannot settle (modules, config fields)
    wheels: tuple[str, ...] = ()
    wheel_bytes: int = 0
    bytes_read: int = 0
    requests: int = 0
    seconds: float = 0.0
    cached: bool = False
    dated: bool = False  # removed_in was looked for (compat --removed-in)

    @property
    def blocking(self) -> tuple[Incompatibility, ...]:
        """The findings that break vLLM as a whole (scoped ones name what they break)."""
        return tuple(f for f in self.findings if f.everywhere)

    @property
    def compatible(self) -> bool:
        return not self.blocking

    @property
    def broken_architectures(self) -> tuple[str, ...]:
        """Every architecture, model type, processor and checkpoint condition a scoped
        finding breaks, sorted."""
        return tuple(
            sorted(
                {a for f in self.findings for a in f.architectures}
                | {f"model type {t}" for f in self.findings for t in f.model_types}
                | {f"processor {p}" for f in self.findings for p in f.processors}
                | {c for f in self.findings for c in f.conditions}
            )
        )

    def summary(self, shown: int = 3) -> str:
        """The blocking findings in one line: the first ``shown``, then how many more."""
        core = self.blocking
        named = "; ".join(f"{f.code.value} {f.name} at {f.file}:{f.line}" for f in core[:shown])
        return named + (f" (and {len(core) - shown} more)" if len(core) > shown else "")

    def breaks(
        self, architecture: str, model_type: str = "", config: Mapping[str, Any] | None = None
    ) -> tuple[Incompatibility, ...]:
        """The findings that break loading ``architecture`` (of ``model_type``, with this
        ``config.json`` when given) with this pair. One scoped only to a processor or a
        checkpoint condition is not among them: a config.json names neither."""
        return tuple(
            f
            for f in self.findings
            if (
                f.everywhere
                or architecture in f.architectures
                or (model_type and model_type in f.model_types)
            )
            and f.applies_to(config)
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.compatible,
            "vllm": self.vllm,
            "transformers": self.transformers,
            "reference": self.reference or None,
            "declared": self.declared.to_dict(),
            "findings": [f.to_dict() for f in self.findings],
            "imports_checked": self.imports_checked,
            "dated": self.dated,
            "undecided": list(self.undecided),
            "wheels": list(self.wheels),
            "cost": {
                "wheel_bytes": self.wheel_bytes,
                "bytes_read": self.bytes_read,
                "requests": self.requests,
                "seconds": self.seconds,
                "cached": self.cached,
            },
        }

    @classmethod
    def from_entry(cls, f: Fields) -> CompatReport:
        """A report as the cache holds it, every field checked (BadEntry otherwise)."""
        cost = f.table("cost")
        declared = f.table("declared")
        return cls(
            vllm=str(Version(f.text("vllm"))),
            transformers=str(Version(f.text("transformers"))),
            reference=f.text("reference", ""),
            findings=tuple(Incompatibility.from_entry(i) for i in f.tables("findings")),
            declared=Declared(
                requirement=declared.text("requirement", ""), inside=declared.flag("inside")
            ),
            imports_checked=f.whole("imports_checked"),
            dated=f.flag("dated", False),
            undecided=f.texts("undecided"),
            wheels=f.texts("wheels"),
            wheel_bytes=cost.whole("wheel_bytes"),
            bytes_read=cost.whole("bytes_read"),
            requests=cost.whole("requests"),
            seconds=cost.number("seconds"),
            cached=True,
        )


def _key(vllm: Version | str, transformers: Version | str, index: str) -> str:
    return f"vllm-{vllm}+transformers-{transformers}.{index_key(index)}"


def load_cached(vllm: Version, transformers: Version, index: str) -> CompatReport | None:
    """The cached report of a pair from ``index``; None when there is none or it is bad (a
    bad entry is discarded by the cache and made again)."""
    report = COMPAT.load(_key(vllm, transformers, index), CompatReport.from_entry)
    same = report is not None and (report.vllm, report.transformers) == (
        str(vllm),
        str(transformers),
    )
    return report if same else None


def store(report: CompatReport, index: str) -> None:
    """Keep ``report`` for the pair and index (nothing when it cannot be written)."""
    COMPAT.store(_key(report.vllm, report.transformers, index), report.to_dict())
