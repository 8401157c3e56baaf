"""Can a profile load a model? Decided from config.json, the way vLLM and transformers would.

vLLM loads a checkpoint in two steps, and both must succeed:

1. The config. If ``model_type`` is one vLLM ships its own config class for
   (``_CONFIG_REGISTRY``), vLLM uses it; otherwise transformers' ``AutoConfig`` must know the
   type (``CONFIG_MAPPING_NAMES``), or the checkpoint must bring its own code (``auto_map``,
   with ``--trust-remote-code``).
2. The model class. vLLM walks ``architectures`` and takes the first one in its registry
   (``_VLLM_MODELS``); none there is an error, worded differently when the architecture was
   dropped (``_PREVIOUSLY_SUPPORTED_MODELS``) or moved to a plugin (``_OOT_SUPPORTED_MODELS``).

The lists come from the profile's ``[models]`` table, scanned from its pinned releases.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envkit.errors import BadInput, NetworkError
from envkit.findings import Finding
from envkit.io.escaping import shell_command
from envkit.io.files import present, read_small_text
from envkit.io.redaction import redact
from envkit.profiles.bounds import Bound
from envkit.profiles.profile import Profile

MAX_CONFIG_BYTES = 8 * 1024 * 1024  # real config.json files are a few KB
# where a fix names the profiles that can load the model: filled in by name_fixes, once
# every profile has been judged (judge sees one profile at a time)
SUPPORTED = "(see supported_by)"
REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    source: str
    model_type: str
    architectures: tuple[str, ...]
    remote_code: bool  # auto_map names an AutoConfig class shipped with the checkpoint
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True, kw_only=True)
class Verdict:
    profile: str
    ok: bool
    architecture: str  # the one vLLM would use, when ok
    problems: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "ok": self.ok,
            "architecture": self.architecture or None,
            "problems": [p.to_dict() for p in self.problems],
            "notes": list(self.notes),
        }


def load_model_config(model: str, *, revision: str | None = None) -> ModelConfig:
    """Read config.json from a folder, a file, or a Hugging Face repo id (at ``revision``).

    Raises BadInput (missing or broken config, no ``model_type``, bad ``architectures``)
    and NetworkError (the Hub cannot be reached, and the file is not in its cache).
    """
    path = Path(model).expanduser()
    if path.is_dir():
        path = path / "config.json"
        if not present(path):
            raise BadInput(
                f"{model!r} is a folder without a config.json.",
                "Pass the model's folder, its config.json, or a repo id (org/name).",
            )
    if present(path):  # a FIFO or a device is refused, not read
        return parse_config(read_model_text(path), str(path))
    if REPO_ID.fullmatch(model) and ".." not in model and not model.startswith("."):
        from envkit.io.hub import fetch

        source = f"hub:{model}" + (f"@{revision}" if revision else "")
        return parse_config(fetch(model, "config.json", revision), source)
    raise BadInput(
        f"{model!r} is not a model folder, a config.json file, or a repo id such as "
        "Qwen/Qwen2-VL-2B-Instruct.",
        "Check the path.",
    )


def read_model_text(path: Path) -> str:
    """A model file's text (config.json and its siblings): a regular UTF-8 file of at most
    MAX_CONFIG_BYTES, checked before reading. BadInput (UnreadableFile) otherwise."""
    return read_small_text(path, MAX_CONFIG_BYTES, what="model file")


def load_json(text: str | bytes, source: str) -> Any:
    """JSON from a model file; BadInput (exit 2) for anything that is not plain JSON: bad
    syntax, NaN or Infinity (not JSON, though Python's parser takes them), nesting too deep."""

    def no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    try:
        return json.loads(text, parse_constant=no_constants)
    except json.JSONDecodeError as exc:
        raise BadInput(
            f"{source} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}).",
            "Fix or re-download the file.",
        ) from None
    except ValueError as exc:
        raise BadInput(f"{source} is not valid JSON: {exc}.", "Fix the file.") from None
    except RecursionError:
        raise BadInput(
            f"{source} is nested too deeply to be a model file.", "Use the model's own file."
        ) from None


def parse_config(text: str, source: str) -> ModelConfig:
    data = load_json(text, source)
    if not isinstance(data, dict):
        raise BadInput(
            f"{source} holds a JSON {type(data).__name__}, not an object.",
            "A model's config.json is a JSON object.",
        )
    model_type = data.get("model_type")
    if not isinstance(model_type, str) or not model_type.strip():
        raise BadInput(
            f"{source} has no model_type, so neither transformers nor vLLM can tell which "
            "config class reads it.",
            "Use the checkpoint's own config.json (it names its model_type).",
        )
    archs = data.get("architectures", [])
    if archs is None:
        archs = []
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise BadInput(
            f"{source}: architectures must be a list of class names, "
            f"found {json.dumps(archs)[:80]}.",
            "Fix config.json.",
        )
    auto_map = data.get("auto_map")
    remote = isinstance(auto_map, dict) and "AutoConfig" in auto_map
    return ModelConfig(
        source=redact(source),
        model_type=model_type,
        architectures=tuple(archs),
        remote_code=remote,
        raw=data,
    )


def judge(profile: Profile, config: ModelConfig) -> Verdict:
    """What the profile's pinned vLLM and transformers would do with this config."""
    known = profile.models
    where = f"vLLM {known.vllm or '?'} + transformers {known.transformers or '?'}"
    if not known.architectures:
        return Verdict(
            profile=profile.name,
            ok=False,
            architecture="",
            problems=(
                Finding(
                    code="profile-not-scanned",
                    message=f"Profile {profile.name} lists no architectures.",
                    fix=shell_command(["envkit", "scan", "--update", profile.name]),
                ),
            ),
        )
    problems: list[Finding] = []
    notes: list[str] = []
    mt = config.model_type
    if mt in known.vllm_model_types:
        notes.append(f"model type {mt!r} is read by vLLM's own config class")
    elif mt not in known.model_types:
        if config.remote_code:
            notes.append(
                f"model type {mt!r} is unknown to transformers {known.transformers}; "
                "the checkpoint ships its config code (needs --trust-remote-code)"
            )
        else:
            problems.append(
                Finding(
                    code="unknown-model-type",
                    message=f"model type {mt!r} is unknown to transformers {known.transformers}, "
                    f"and vLLM {known.vllm} has no config class for it",
                    fix=f"use a profile whose transformers knows it {SUPPORTED}",
                )
            )
    chosen = next((a for a in config.architectures if a in known.architectures), "")
    if not config.architectures:
        problems.append(
            Finding(
                code="no-architectures",
                message="config.json names no architectures",
                fix="add the model class to architectures in config.json",
            )
        )
    elif not chosen:
        problems.extend(
            _architecture_problems(
                config.architectures,
                known.vllm,
                dict(known.previously_supported),
                dict(known.out_of_tree),
            )
        )
    bound = known.transformers_bounds.get(chosen) if chosen else None
    if bound is not None and bound.excludes(known.transformers):
        problems.append(bound_finding(bound, known.vllm, known.transformers))
    if problems and mt in known.model_types and not chosen and config.architectures:
        notes.append(
            "vLLM's Transformers backend (--model-impl transformers) may still run it "
            "if the transformers model class supports it; envkit does not count on it"
        )
    return Verdict(
        profile=profile.name,
        ok=not problems,
        architecture=chosen,
        problems=tuple(problems),
        notes=tuple(notes) + ((f"checked against {where}",) if not problems else ()),
    )


def bound_finding(bound: Bound, vllm: str, transformers: str) -> Finding:
    """vLLM's own tests skip ``bound.architecture`` with this transformers release."""
    code = bound.excludes(transformers)
    reason = f" ({bound.reason})" if bound.reason else ""
    example = f"; vLLM tests it with {bound.example}" if bound.example else ""
    return Finding(
        code=code,
        message=f"vLLM {vllm}'s test registry needs {bound.describe()} for {bound.architecture}"
        f"{reason}; the profile pins transformers {transformers}{example}",
        fix=f"pin transformers within vLLM's bound ({bound.describe()}), or use a profile "
        f"whose pins fit it {SUPPORTED}",
    )


def _architecture_problems(
    archs: tuple[str, ...], vllm: str, previous: dict[str, str], plugins: dict[str, str]
) -> list[Finding]:
    out = []
    for arch in archs:
        if arch in previous:
            out.append(
                Finding(
                    code="architecture-removed",
                    message=f"{arch} was supported until vLLM {previous[arch]} and "
                    f"is not in vLLM {vllm}",
                    fix=f"use vLLM {previous[arch]} or older",
                )
            )
        elif arch in plugins:
            out.append(
                Finding(
                    code="architecture-out-of-tree",
                    message=f"{arch} is not in vLLM {vllm} itself; it lives in a "
                    f"plugin ({plugins[arch]})",
                    fix=f"install the plugin: {plugins[arch]}",
                )
            )
        else:
            out.append(
                Finding(
                    code="unsupported-architecture",
                    message=f"{arch} is not in vLLM {vllm}'s model registry",
                    fix=f"use a profile whose vLLM lists it {SUPPORTED}",
                )
            )
    return out


@dataclass(frozen=True, kw_only=True)
class ModelReport:
    """A model against one profile (or none) and against every shipped profile."""

    config: ModelConfig
    verdict: Verdict | None  # the profile asked about; None for `which`
    verdicts: tuple[Verdict, ...]  # every shipped profile, loadable first
    releases: Any = None  # registry_scan.ReleaseSpan when nothing shipped can load it
    lookup: str = ""  # why releases could not be looked up

    @property
    def supported_by(self) -> tuple[str, ...]:
        return tuple(v.profile for v in self.verdicts if v.ok)

    @property
    def ok(self) -> bool:
        return self.verdict.ok if self.verdict is not None else bool(self.supported_by)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "ok": self.ok,
            "model": self.config.source,
            "model_type": self.config.model_type,
            "architectures": list(self.config.architectures),
            "remote_code": self.config.remote_code,
        }
        if self.verdict is not None:
            data.update(self.verdict.to_dict())
        else:
            data["profiles"] = [v.to_dict() for v in self.verdicts]
        data["supported_by"] = list(self.supported_by)
        data["releases"] = (
            {
                "architecture": self.releases.architecture,
                "first": self.releases.first,
                "newest": self.releases.newest,
                "latest_release": self.releases.latest_release,
                "plugin": self.releases.plugin or None,
            }
            if self.releases is not None
            else None
        )
        if self.lookup:
            data["releases_lookup"] = self.lookup
        return data


def _noted(verdict: Verdict, stale: dict[str, str] | None) -> Verdict:
    note = (stale or {}).get(verdict.profile)
    if not note:
        return verdict
    return Verdict(
        profile=verdict.profile,
        ok=verdict.ok,
        architecture=verdict.architecture,
        problems=verdict.problems,
        notes=(note, *verdict.notes),
    )


def rank(profiles: list[Profile], config: ModelConfig) -> tuple[Verdict, ...]:
    """Every profile's verdict: loadable first, newer vLLM first within each group."""
    from packaging.version import InvalidVersion, Version

    def newest(p: Profile) -> Version:
        try:
            return Version(p.models.vllm or "0")
        except InvalidVersion:
            return Version("0")

    ordered = sorted(profiles, key=lambda p: (newest(p), p.name), reverse=True)
    verdicts = [judge(p, config) for p in ordered]
    return tuple(sorted(verdicts, key=lambda v: not v.ok))


def report(
    config: ModelConfig,
    profile: Profile | None,
    shipped: list[Profile],
    find_releases: Any,
    stale: dict[str, str] | None = None,
) -> ModelReport:
    """``find_releases(architecture)`` returns a ReleaseSpan or None, or raises NetworkError;
    None for ``find_releases`` looks nothing up (plan). ``stale`` names the profiles whose
    ``[models]`` table was replaced by a fresh scan. Every fix names what to take: the
    profiles that can load the model, else the command that drafts one."""
    verdicts = tuple(_noted(v, stale) for v in rank(shipped, config))
    verdict = _noted(judge(profile, config), stale) if profile is not None else None
    releases, lookup, none_listed = None, "", False
    if (
        find_releases is not None
        and not any(v.ok for v in verdicts)
        and (verdict is None or not verdict.ok)
    ):
        try:
            for arch in config.architectures:
                releases = find_releases(arch)
                if releases is not None:
                    break
            if releases is None:
                none_listed = True
                lookup = "no published vLLM release lists " + (
                    " or ".join(config.architectures) or "these architectures"
                )
        except NetworkError as exc:
            lookup = f"could not look up vLLM releases: {exc.message}"
    supported = tuple(v.profile for v in verdicts if v.ok)
    named = _Fixes(supported, config.source, releases, none_listed)
    return ModelReport(
        config=config,
        verdict=named.verdict(verdict) if verdict is not None else None,
        verdicts=tuple(named.verdict(v) for v in verdicts),
        releases=releases,
        lookup=lookup,
    )


@dataclass(frozen=True)
class _Fixes:
    """The fixes that pointed at supported_by, with the names in them (or, when no profile
    can load the model, what to do instead: draft one from the releases that list it)."""

    supported: tuple[str, ...]
    model: str
    releases: Any  # registry.ReleaseSpan, when looked up and found
    none_listed: bool  # looked up: no published vLLM release lists it

    def text(self) -> str:
        if self.supported:
            others = f" (or {', '.join(self.supported[1:])})" if len(self.supported) > 1 else ""
            return f": {self.supported[0]}{others}, envkit build {self.supported[0]}"
        draft = f"envkit new-profile NAME --for-model {self.model}"
        if self.releases is not None and self.releases.listed:
            rel = self.releases
            return (
                f"; none here can, but vLLM {rel.first} through {rel.newest} list "
                f"{rel.architecture}: draft one, {draft}"
            )
        if self.none_listed:
            return (
                "; none can: no published vLLM release lists it (vLLM's Transformers "
                "backend, --model-impl transformers, may run it)"
            )
        return f"; none here can: draft one, {draft} (it finds the vLLM releases listing it)"

    def verdict(self, found: Verdict) -> Verdict:
        problems = tuple(
            dataclasses.replace(p, fix=p.fix.replace(f" {SUPPORTED}", self.text()))
            for p in found.problems
        )
        return dataclasses.replace(found, problems=problems)
