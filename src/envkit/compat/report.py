"""What ``envkit compat`` answers for one vLLM x transformers pair, and its per-pair cache.

A finding (:class:`Incompatibility`) is what breaks, where vLLM uses it and what it breaks:
vLLM as a whole, or only some architectures or model types. The report adds what vLLM's own
requirement says of the pair (:class:`Declared`): inside the declared range, or outside with
the requirement an installer enforces. That is no run-time finding, so it never changes
``compatible``; it says that no installer picks the pair without an override.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from envkit.errors import FileSystemError
from envkit.io.atomicfile import write_atomic
from envkit.releases.registry import cache_dir, index_key

FORMAT = 2  # bump when the report's content changes: old cache entries are then ignored


class Code(str, Enum):
    MISSING_MODULE = "missing-module"
    MISSING_NAME = "missing-name"
    REMOVED_ATTRIBUTE = "removed-attribute"  # the checked release is newer than the reference
    MISSING_ATTRIBUTE = "missing-attribute"  # older: vLLM reads what came later
    REGISTRATION_CLASH = "registration-clash"  # vLLM registers a name transformers owns
    CONFIG_CONFLICT = "config-conflict"  # a config field vLLM sets that the config class rejects


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
    model_types: tuple[str, ...] = ()  # ...and these; neither: vLLM itself breaks

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
        """It breaks vLLM as a whole (no architecture or model type narrows it)."""
        return not self.architectures and not self.model_types

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["code"] = self.code.value
        data["architectures"] = list(self.architectures)
        data["model_types"] = list(self.model_types)
        data["removed_in"] = self.removed_in or None
        data["taken_in"] = self.taken_in or None
        data["detail"] = self.detail or None
        data["config_key"] = self.config_key or None
        data["config_values"] = list(self.config_values)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Incompatibility:
        return cls(
            code=Code(data["code"]),
            name=str(data["name"]),
            module=str(data["module"]),
            file=str(data["file"]),
            line=int(data["line"]),
            places=int(data["places"]),
            removed_in=str(data.get("removed_in") or ""),
            taken_in=str(data.get("taken_in") or ""),
            detail=str(data.get("detail") or ""),
            config_key=str(data.get("config_key") or ""),
            config_values=tuple(str(v) for v in data.get("config_values") or ()),
            architectures=tuple(str(a) for a in data["architectures"]),
            model_types=tuple(str(t) for t in data.get("model_types") or ()),
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
    def compatible(self) -> bool:
        """No finding breaks vLLM as a whole (scoped ones name what they break)."""
        return not any(f.everywhere for f in self.findings)

    def breaks(
        self, architecture: str, model_type: str = "", config: Mapping[str, Any] | None = None
    ) -> tuple[Incompatibility, ...]:
        """The findings that break loading ``architecture`` (of ``model_type``, with this
        ``config.json`` when given) with this pair."""
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
    def from_dict(cls, data: Mapping[str, Any]) -> CompatReport:
        cost = data["cost"]
        declared = data["declared"]
        return cls(
            vllm=str(data["vllm"]),
            transformers=str(data["transformers"]),
            reference=str(data.get("reference") or ""),
            findings=tuple(Incompatibility.from_dict(f) for f in data["findings"]),
            declared=Declared(
                requirement=str(declared.get("requirement") or ""),
                inside=bool(declared["inside"]),
            ),
            imports_checked=int(data["imports_checked"]),
            dated=bool(data.get("dated", False)),
            undecided=tuple(str(u) for u in data["undecided"]),
            wheels=tuple(str(w) for w in data["wheels"]),
            wheel_bytes=int(cost["wheel_bytes"]),
            bytes_read=int(cost["bytes_read"]),
            requests=int(cost["requests"]),
            seconds=float(cost["seconds"]),
            cached=True,
        )


def _cache_file(vllm: Version, transformers: Version, index: str) -> Path:
    name = f"vllm-{vllm}+transformers-{transformers}.{index_key(index)}.v{FORMAT}.json"
    return cache_dir().parent / "compat" / name


def load_cached(vllm: Version, transformers: Version, index: str) -> CompatReport | None:
    path = _cache_file(vllm, transformers, index)
    try:
        if path.stat().st_size > 4 * 1024 * 1024:
            return None
        report = CompatReport.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None
    same = (report.vllm, report.transformers) == (str(vllm), str(transformers))
    return report if same else None


def store(report: CompatReport, index: str) -> None:
    path = _cache_file(Version(report.vllm), Version(report.transformers), index)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(report.to_dict(), sort_keys=True))
    except (OSError, FileSystemError):
        pass  # a cache that cannot be written only costs time
