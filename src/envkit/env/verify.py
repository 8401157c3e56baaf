"""Post-install verification: is this venv what the profile says, and does it work?

Facts are gathered by one run of ``env/inside_venv.py`` inside the venv's own interpreter; they are
judged here, with packaging, into :class:`Check` results. Each failing check carries a
one-line fix.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envkit.env.facts import collect_facts, venv_python
from envkit.errors import BadInput
from envkit.gpu import linkage
from envkit.profiles.profile import Profile, Torch

if TYPE_CHECKING:  # compat loads the HTTP client; verify gets its answers through a callable
    from envkit.compat.checker import CompatReport

# (vllm version, transformers version) -> the compat report, or why it could not be made
CompatLookup = Callable[[str, str], Union["CompatReport", str]]


class Status(enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True, slots=True, kw_only=True)
class Check:
    kind: str  # interpreter | version | import | probe | torch | compat
    name: str
    status: Status
    expected: str = ""
    found: str = ""
    detail: str = ""
    fix: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "status": self.status.value,
            "ok": self.status is not Status.FAIL,
            "expected": self.expected,
            "found": self.found,
            "detail": self.detail,
            "fix": self.fix,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    profile: str
    venv: Path
    python: str
    checks: tuple[Check, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return all(c.status is not Status.FAIL for c in self.checks)

    @property
    def failures(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status is Status.FAIL)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "profile": self.profile,
            "venv": str(self.venv),
            "python": self.python,
            "checks": [c.to_dict() for c in self.checks],
        }


def facts_request(profile: Profile) -> dict[str, Any]:
    """What the probe must look at for ``profile``'s checks."""
    return {
        "distributions": sorted(profile.expected_versions()),
        "imports": list(profile.checks.imports),
        "probes": list(profile.checks.probes),
        "torch": bool(profile.torch.cuda or profile.torch.backend),
    }


def gather(venv: Path, profile: Profile, timeout: float = 900) -> dict[str, Any]:
    """Run the probe in ``venv``'s interpreter once and return its facts."""
    python = venv_python(venv)
    if not python.exists():
        raise BadInput(
            f"{str(venv)!r} is not a virtual environment (no {python.relative_to(venv)}).",
            f"Build it with `envkit build {profile.name} --venv {venv}`.",
        )
    return collect_facts(python, facts_request(profile), venv, timeout)


def assess(
    profile: Profile,
    venv: Path,
    facts: dict[str, Any],
    shown: Path | None = None,
    *,
    torch: Torch | None = None,
    compat: CompatLookup | None = None,
) -> Report:
    """Turn probe facts into checks. ``shown`` is the path to report (after a move)."""
    prefix = os.path.realpath(venv)
    final = str(shown or venv)

    def show(path: str) -> str:
        if path == prefix or path.startswith(prefix + os.sep):
            return final + path[len(prefix) :]
        return path

    def inside(path: str) -> bool:
        return path == prefix or path.startswith(prefix + os.sep)

    checks: list[Check] = []
    version = str(facts["version"])
    fits = Version(version) in profile.python_spec
    checks.append(
        Check(
            kind="interpreter",
            name="python",
            status=Status.PASS if fits and facts["prefix"] == prefix else Status.FAIL,
            expected=f"Python {profile.python} in {final}",
            found=f"Python {version} at {show(str(facts['executable']))}",
            detail="" if facts["prefix"] == prefix else f"sys.prefix is {facts['prefix']}",
            fix="" if fits else f"rebuild: envkit build {profile.name} --python {profile.python}",
        )
    )
    for dist, expected in sorted(profile.expected_versions().items()):
        checks.append(_version_check(profile, dist, expected, facts, inside, show))
    why = _Why(facts)
    for module, result in facts.get("imports", {}).items():
        checks.append(_import_check(profile, module, result, inside, show, why))
    for dotted, result in facts.get("probes", {}).items():
        ok = bool(result.get("ok"))
        checks.append(
            Check(
                kind="probe",
                name=dotted,
                status=Status.PASS if ok else Status.FAIL,
                expected="present",
                found="present" if ok else "missing",
                detail="" if ok else str(result.get("error", "")),
                fix="" if ok else _probe_fix(profile, str(result.get("module") or dotted)),
            )
        )
    if "torch" in facts:
        checks.extend(_torch_checks(torch or profile.torch, facts["torch"], profile.name))
    installed = {
        name: str(copies[0]["version"])
        for name in ("vllm", "transformers")
        if (copies := facts.get("distributions", {}).get(name))
    }
    if compat is not None and len(installed) == 2:
        checks.append(compat_check(installed["vllm"], installed["transformers"], compat))
    linked = linkage.linkage_on(facts.get("sys_path", []))
    if linked is not None:
        checks.append(kernels_check(linked, profile.name))
    return Report(profile=profile.name, venv=Path(final), python=version, checks=tuple(checks))


def compat_check(vllm: str, transformers: str, compat: CompatLookup) -> Check:
    """The installed pair against `envkit compat`'s findings (a warning when the wheels
    could not be read: that is no verdict)."""
    name = f"vllm {vllm} + transformers {transformers}"
    found = compat(vllm, transformers)
    if isinstance(found, str):
        return Check(
            kind="compat", name=name, status=Status.WARN, expected="compatible",
            found="not checked", detail=found,
        )  # fmt: skip
    core = [f for f in found.findings if f.everywhere]
    scoped = sorted(
        {a for f in found.findings for a in f.architectures}
        | {f"model type {t}" for f in found.findings for t in f.model_types}
    )
    if core:
        detail = "; ".join(f"{f.code.value} {f.name} at {f.file}:{f.line}" for f in core[:3])
        more = f" (and {len(core) - 3} more)" if len(core) > 3 else ""
        return Check(
            kind="compat", name=name, status=Status.FAIL, expected="compatible",
            found="not compatible", detail=detail + more,
            fix=f"pin a transformers vLLM {vllm} works with (envkit compat vllm=={vllm} "
            f"transformers=={transformers} lists what breaks)",
        )  # fmt: skip
    detail = f"cannot load: {', '.join(scoped)}" if scoped else ""
    return Check(
        kind="compat", name=name, status=Status.PASS, expected="compatible",
        found="compatible", detail=detail,
    )  # fmt: skip


def kernels_check(linked: linkage.Linkage, profile: str) -> Check:
    """vLLM's extension modules against the torch beside them (linkage.py)."""
    ext = f"{len(linked.extensions)} extension module(s)"
    if linked.unreadable:
        return Check(
            kind="kernels", name="vllm", status=Status.WARN, expected="links against torch",
            found="not checked", detail=f"symbol tables not read: {linked.unreadable}",
        )  # fmt: skip
    if linked.links:
        return Check(
            kind="kernels", name="vllm", status=Status.PASS, expected="links against torch",
            found=f"{ext} need {linked.needed} torch symbols; torch defines them all",
        )  # fmt: skip
    return Check(
        kind="kernels", name="vllm", status=Status.FAIL, expected="links against torch",
        found=f"{len(linked.missing)} torch symbol(s) undefined", detail=linked.problem(),
        fix=f"install the torch version vLLM pins, in its default build: envkit build {profile}",
    )  # fmt: skip


def _version_check(
    profile: Profile, dist: str, expected: str, facts: dict[str, Any], inside: Any, show: Any
) -> Check:
    copies = facts.get("distributions", {}).get(canonicalize_name(dist), [])
    fix = f"rebuild: envkit build {profile.name}"
    if not copies:
        return Check(
            kind="version",
            name=dist,
            status=Status.FAIL,
            expected=expected,
            found="not installed",
            fix=fix,
        )
    own = [c for c in copies if inside(c["location"])]
    first = (own or copies)[0]
    found = str(first["version"])
    try:
        matches = Version(found) in SpecifierSet(f"=={expected}")
    except InvalidVersion:
        matches = found == expected
    detail = ""
    status = Status.PASS if matches and own else Status.FAIL
    if len(copies) > 1:
        status = Status.FAIL
        detail = "mixed install, copies: " + "; ".join(
            f"{c['version']} in {show(c['location'])} (installed by {c['installer'] or 'unknown'})"
            for c in copies
        )
        fix = f"remove the copies outside the venv, or rebuild: envkit build {profile.name}"
    elif not own:
        detail = f"found only outside the venv, in {first['location']}"
    return Check(
        kind="version",
        name=dist,
        status=status,
        expected=expected,
        found=found,
        detail=detail,
        fix="" if status is Status.PASS else fix,
    )


class _Why:
    """Explains why a sys.path entry outside the venv is searched at all."""

    def __init__(self, facts: dict[str, Any]) -> None:
        self.facts = facts

    def __call__(self, entry: str) -> tuple[str, str]:
        if entry in self.facts.get("pythonpath", []):
            return "it is on PYTHONPATH", "unset PYTHONPATH (or remove that entry)"
        if entry and entry == self.facts.get("user_site"):
            return "it is the user site-packages (pip install --user)", (
                "remove the user copy (pip uninstall --user), or set PYTHONNOUSERSITE=1"
            )
        if entry in self.facts.get("site_packages", []) or entry.startswith(
            str(self.facts.get("base_prefix", "\0"))
        ):
            return "the venv includes the base interpreter's site-packages", (
                "rebuild without system site-packages: envkit build"
            )
        return "a .pth file or sitecustomize put it on sys.path", "remove that .pth entry"


def _import_check(
    profile: Profile, module: str, result: dict[str, Any], inside: Any, show: Any, why: _Why
) -> Check:
    if not result.get("ok"):
        return Check(
            kind="import",
            name=module,
            status=Status.FAIL,
            expected="imports",
            found="fails",
            detail=str(result.get("error", "")),
            fix=f"rebuild: envkit build {profile.name}; if it persists the pins clash",
        )
    file = str(result.get("file", ""))
    copies = result.get("copies", [])
    winner = next((c for c in copies if file.startswith(c["entry"] + os.sep)), None)
    if not inside(file):
        reason, fix = why(winner["entry"]) if winner else ("unknown", "rebuild the venv")
        index = f"sys.path[{winner['index']}]" if winner else "sys.path"
        return Check(
            kind="import",
            name=module,
            status=Status.FAIL,
            expected="inside the venv",
            found=file,
            detail=f"mixed install: {index} {winner['entry'] if winner else ''}"
            f" wins because {reason}",
            fix=fix,
        )
    others = [c["entry"] for c in copies if not inside(c["entry"])]
    seconds = float(result.get("seconds", 0.0))
    return Check(
        kind="import",
        name=module,
        status=Status.WARN if others else Status.PASS,
        expected="inside the venv",
        found=show(file),
        detail=(
            f"imports in {seconds:.1f} s"
            + ("; shadowed copies also on sys.path: " + ", ".join(others) if others else "")
        ),
        fix="",
    )


def _probe_fix(profile: Profile, module: str) -> str:
    top = module.split(".")[0]
    pins = [
        c
        for c in (*profile.constraints, *profile.requirements)
        if canonicalize_name(Requirement(c).name) == canonicalize_name(top)
    ]
    if pins:
        return f"the profile pins {pins[0]}; rebuild with `envkit build {profile.name}`"
    return f"pin {top} to a version that has it in the profile's constraints, then rebuild"


def _torch_checks(want: Torch, torch: dict[str, Any], profile_name: str) -> list[Check]:
    if not torch.get("ok"):
        return [
            Check(
                kind="torch",
                name="torch.version.cuda",
                status=Status.FAIL,
                expected=want.cuda or "importable",
                found="torch does not import",
                detail=str(torch.get("error", "")),
                fix=f"envkit build {profile_name}",
            )
        ]
    found = torch.get("cuda") or "none (CPU build)"
    backend = want.backend or "cu" + want.cuda.replace(".", "")
    checks = []
    if want.cuda:
        ok = torch.get("cuda") == want.cuda
        checks.append(
            Check(
                kind="torch",
                name="torch.version.cuda",
                status=Status.PASS if ok else Status.FAIL,
                expected=want.cuda,
                found=str(found),
                detail=f"torch {torch.get('version')}",
                fix=""
                if ok
                else (
                    f"rebuild with --torch-backend {backend}"
                    " (or --torch-index default where the index's torch is that CUDA build)"
                ),
            )
        )
    available = bool(torch.get("cuda_available"))
    checks.append(
        Check(
            kind="torch",
            name="torch.cuda.is_available()",
            status=Status.PASS if available or not want.cuda else Status.WARN,
            expected="True" if want.cuda else "any",
            found=str(available),
            detail=""
            if available
            else "no usable GPU or driver on this machine; fine for building",
        )
    )
    return checks


def verify(
    profile: Profile,
    venv: Path,
    shown: Path | None = None,
    *,
    torch: Torch | None = None,
    compat: CompatLookup | None = None,
) -> Report:
    """Gather facts in ``venv`` and assess them against ``profile``; ``torch`` is the torch
    build to demand when it is not the profile's own (``build --torch-backend``); ``compat``
    looks the installed vLLM + transformers pair up (compat.lookup)."""
    expected = torch or profile.torch
    return assess(profile, venv, gather(venv, profile), shown, torch=expected, compat=compat)
