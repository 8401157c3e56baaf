"""Can a profile load a model? Decided from config.json, the way vLLM and transformers would.

vLLM loads a checkpoint in two steps, and both must succeed:

1. The config. If ``model_type`` is one vLLM ships its own config class for
   (``_CONFIG_REGISTRY``), vLLM uses it; otherwise transformers' ``AutoConfig`` must know the
   type (``CONFIG_MAPPING_NAMES``), or the checkpoint must bring its own code (``auto_map``,
   with ``--trust-remote-code``).
2. The model class. vLLM walks ``architectures`` and takes the first one in its registry
   (``_VLLM_MODELS``); none there is an error, worded differently when the architecture was
   dropped (``_PREVIOUSLY_SUPPORTED_MODELS``) or moved to a plugin (``_OOT_SUPPORTED_MODELS``).

The lists come from the profile's ``[models]`` table, scanned from its pinned releases;
reading config.json is configfile.py's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from envkit.errors import NetworkError
from envkit.io.escaping import shell_command
from envkit.models.configfile import (
    MAX_CONFIG_BYTES,
    ModelConfig,
    load_json,
    load_model_config,
    parse_config,
    read_model_text,
)
from envkit.profiles.bounds import HF_ONLY, Bound
from envkit.profiles.profile import Profile
from envkit.results import Result, Severity, failed_codes, fixes

if TYPE_CHECKING:  # the GPU check is handed in; check-model without a GPU loads no table
    from envkit.gpu.published.profilefit import GpuCheck

__all__ = [
    "MAX_CONFIG_BYTES", "ModelConfig", "ModelReport", "Verdict", "judge", "load_json",
    "load_model_config", "parse_config", "read_model_text", "report",
]  # fmt: skip

# where a fix names the profiles that can load the model: filled in by name_fixes, once
# every profile has been judged (judge sees one profile at a time)
SUPPORTED = "(see supported_by)"


@dataclass(frozen=True, kw_only=True)
class Verdict:
    profile: str
    ok: bool
    architecture: str  # the one vLLM would use, when ok
    problems: tuple[Result, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def result(self) -> Result:
        """The verdict as the one record: ``model-loads`` (with the architecture vLLM would
        use) or ``model-does-not-load`` (the failing problems' codes its evidence, their
        fixes its own, one a line)."""
        if self.ok:
            return Result(code="model-loads", severity=Severity.OK, subject=self.profile,
                          message=f"{self.profile}: can load it with {self.architecture}",
                          evidence={"architecture": self.architecture})  # fmt: skip
        codes = failed_codes(self.problems)
        return Result(code="model-does-not-load", severity=Severity.ERROR, subject=self.profile,
                      message=f"{self.profile}: CANNOT load it ({codes})",
                      evidence={"problems": codes}, fix=fixes(self.problems))  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "ok": self.ok,
            "architecture": self.architecture or None,
            "problems": [{**p.to_dict(), "where": p.subject} for p in self.problems],
            "notes": list(self.notes),
            "result": self.result.to_dict(),
        }


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
                Result(
                    severity=Severity.ERROR,
                    code="profile-not-scanned",
                    message=f"Profile {profile.name} lists no architectures.",
                    fix=shell_command(["envkit", "scan", "--update", profile.name]),
                ),
            ),
        )
    problems: list[Result] = []
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
                Result(
                    severity=Severity.ERROR,
                    code="unknown-model-type",
                    message=f"model type {mt!r} is unknown to transformers {known.transformers}, "
                    f"and vLLM {known.vllm} has no config class for it",
                    fix=f"use a profile whose transformers knows it {SUPPORTED}",
                )
            )
    chosen = next((a for a in config.architectures if a in known.architectures), "")
    if not config.architectures:
        problems.append(
            Result(
                severity=Severity.ERROR,
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
    refused = [p for p in problems if p.severity is Severity.ERROR]
    if refused and mt in known.model_types and not chosen and config.architectures:
        notes.append(
            "vLLM's Transformers backend (--model-impl transformers) may still run it "
            "if the transformers model class supports it; envkit does not count on it"
        )
    return Verdict(
        profile=profile.name,
        ok=not refused,
        architecture=chosen,
        problems=tuple(problems),
        notes=tuple(notes) + ((f"checked against {where}",) if not refused else ()),
    )


def bound_finding(bound: Bound, vllm: str, transformers: str) -> Result:
    """vLLM's own tests skip ``bound.architecture`` with this transformers release: an
    error when vLLM's initialization test applies the bound, a warning
    (``transformers-bound-hf-only``) when only the reference runner's tests do."""
    code = bound.excludes(transformers)
    reason = f" ({bound.reason})" if bound.reason else ""
    example = f"; vLLM tests it with {bound.example}" if bound.example else ""
    if bound.hf_only_for(transformers):
        return Result(
            code=HF_ONLY,
            message=f"vLLM {vllm}'s test registry bounds {bound.architecture} to "
            f"{bound.describe()}{reason}, but only for the tests comparing with the Hugging "
            f"Face reference runner; vLLM's own initialization test builds it with "
            f"transformers {transformers}{example}",
            fix="nothing to do for serving with vLLM; the bound concerns the reference runner",
            severity=Severity.WARNING,
        )
    return Result(
        severity=Severity.ERROR,
        code=code,
        message=f"vLLM {vllm}'s test registry needs {bound.describe()} for {bound.architecture}"
        f"{reason}; the profile pins transformers {transformers}{example}",
        fix=f"pin transformers within vLLM's bound ({bound.describe()}), or use a profile "
        f"whose pins fit it {SUPPORTED}",
    )


def _architecture_problems(
    archs: tuple[str, ...], vllm: str, previous: dict[str, str], plugins: dict[str, str]
) -> list[Result]:
    out = []
    for arch in archs:
        if arch in previous:
            out.append(
                Result(
                    severity=Severity.ERROR,
                    code="architecture-removed",
                    message=f"{arch} is not in vLLM {vllm}; vLLM records it as supported until "
                    f"{previous[arch]}",
                    fix=f"use vLLM {previous[arch]} or older",
                    subject=arch,
                )
            )
        elif arch in plugins:
            out.append(
                Result(
                    severity=Severity.ERROR,
                    code="architecture-out-of-tree",
                    message=f"{arch} is not in vLLM {vllm} itself; it lives in a "
                    f"plugin ({plugins[arch]})",
                    fix=f"install the plugin: {plugins[arch]}",
                )
            )
        else:
            out.append(
                Result(
                    severity=Severity.ERROR,
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
    gpu: str = ""  # the GPU the builds were checked for, where it came from ('' for none)

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
        data["gpu"] = self.gpu or None
        return data


def _noted(verdict: Verdict, stale: dict[str, str] | None) -> Verdict:
    note = (stale or {}).get(verdict.profile)
    return dataclasses.replace(verdict, notes=(note, *verdict.notes)) if note else verdict


def _confirmed(verdict: Verdict, find_releases: Any, spans: dict[str, Any]) -> Verdict:
    """``architecture-removed`` said from the registries: vLLM's record of the last release
    ("until X") is repeated only where the releases' registries agree; otherwise the newest
    release that lists it is named. When they cannot be read, the record is said as such;
    with no ``find_releases`` (plan looks nothing up) the verdict stays as it is."""
    if find_releases is None:
        return verdict
    problems = []
    for problem in verdict.problems:
        if problem.code == "architecture-removed" and problem.subject:
            problem = _from_registries(problem, find_releases, spans)
        problems.append(problem)
    return dataclasses.replace(verdict, problems=tuple(problems))


def _from_registries(problem: Result, find_releases: Any, spans: dict[str, Any]) -> Result:
    arch = problem.subject
    recorded = problem.message.rpartition("supported until ")[2]
    if arch not in spans:
        try:
            spans[arch] = find_releases(arch)
        except NetworkError as exc:
            spans[arch] = exc
    span = spans[arch]
    head = problem.message.partition(";")[0]
    if isinstance(span, NetworkError):
        message = f"{head}; vLLM records it as supported until {recorded} (not checked against "
        message += f"the releases' registries: {span.message})"
        return dataclasses.replace(problem, message=message)
    if span is None or not span.newest:
        return dataclasses.replace(problem, message=f"{head}; no published release lists it")
    if span.newest == recorded:
        message = f"{head}; it was supported until vLLM {span.newest}"
    else:
        listed = (
            f"vLLM {span.first} lists it"
            if span.first == span.newest
            else f"vLLM {span.first} through {span.newest} list it"
        )
        message = (
            f"{head}; {listed} (vLLM's own record says until {recorded}, which its "
            "registries contradict)"
        )
    return dataclasses.replace(problem, message=message, fix=f"use vLLM {span.newest} or older")


def on_gpu(verdict: Verdict, profile: Profile, gpu: GpuCheck | None) -> Verdict:
    """The verdict with what the profile's builds do on the GPU
    (:mod:`envkit.gpu.published.profilefit`): an error among them makes it not ok."""
    found = gpu(profile) if gpu is not None else ()
    if not found:
        return verdict
    failing = any(f.severity is Severity.ERROR for f in found)
    notes = tuple(f.message for f in found if f.code == "runs-on")  # information, not a problem
    return dataclasses.replace(
        verdict,
        ok=verdict.ok and not failing,
        problems=(*verdict.problems, *(f for f in found if f.code != "runs-on")),
        notes=(*verdict.notes, *notes),
    )


def rank(
    profiles: list[Profile], config: ModelConfig, gpu: GpuCheck | None = None
) -> tuple[Verdict, ...]:
    """Every profile's verdict: loadable first, newer vLLM first within each group."""
    from packaging.version import InvalidVersion, Version

    def newest(p: Profile) -> Version:
        try:
            return Version(p.models.vllm or "0")
        except InvalidVersion:
            return Version("0")

    ordered = sorted(profiles, key=lambda p: (newest(p), p.name), reverse=True)
    verdicts = [on_gpu(judge(p, config), p, gpu) for p in ordered]
    return tuple(sorted(verdicts, key=lambda v: not v.ok))


def report(
    config: ModelConfig,
    profile: Profile | None,
    shipped: list[Profile],
    find_releases: Any,
    stale: dict[str, str] | None = None,
    gpu: GpuCheck | None = None,
    gpu_source: str = "",
) -> ModelReport:
    """``find_releases(architecture)`` returns a ReleaseSpan or None, or raises NetworkError;
    None for ``find_releases`` looks nothing up (plan). ``stale`` names the profiles whose
    ``[models]`` table was replaced by a fresh scan; ``gpu`` adds what each profile's builds
    do on the target GPU. Every fix names what to take: the profiles that can load the
    model (and run on the GPU), else the command that drafts one."""
    spans: dict[str, Any] = {}
    verdicts = tuple(
        _confirmed(_noted(v, stale), find_releases, spans) for v in rank(shipped, config, gpu)
    )
    verdict = (
        _confirmed(
            _noted(on_gpu(judge(profile, config), profile, gpu), stale), find_releases, spans
        )
        if profile is not None
        else None
    )
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
        gpu=gpu_source,
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
