"""Post-install verification: is this venv what the profile says, and does it work?

Facts are gathered by one run of ``env/inside_venv.py`` inside the venv's own interpreter; they are
judged here, with packaging, into :class:`Result` results. Each failing check carries a
one-line fix.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envkit.env.checks import CompatLookup, Report, check
from envkit.env.companionchecks import companion_checks
from envkit.env.companionchecks import names as companion_names
from envkit.env.facts import ImportFacts, TorchFacts, VenvFacts, collect_facts, venv_python
from envkit.env.gpuchecks import gpu_checks, gpu_side, read_ahead, reading, site_packages
from envkit.env.pairs import known_bad
from envkit.errors import BadInput
from envkit.gpu.installed.assess import GpuReport
from envkit.gpu.installed.detect import Choice
from envkit.io.escaping import shell_command
from envkit.profiles.profile import Profile, Torch
from envkit.progress import Progress, quiet
from envkit.results import Result, Severity

NO_TARGET = Choice(None, "")  # the GPU layer checked for no GPU in particular
Inside = Callable[[str], bool]  # is this path inside the venv?
Show = Callable[[str], str]  # the path as the user should see it (after a move)


def facts_request(profile: Profile) -> dict[str, Any]:
    """What the probe must look at for ``profile``'s checks."""
    return {
        "distributions": sorted({*profile.expected_versions(), *companion_names()}),
        "imports": list(profile.checks.imports),
        "probes": list(profile.checks.probes),
        "torch": bool(profile.torch.cuda or profile.torch.backend),
    }


def gather(venv: Path, profile: Profile, timeout: float = 900) -> VenvFacts:
    """Run the probe in ``venv``'s interpreter once and return its facts."""
    python = venv_python(venv)
    if not python.exists():
        raise BadInput(
            f"{str(venv)!r} is not a virtual environment (no {python.relative_to(venv)}).",
            "Build it with `"
            + shell_command(["envkit", "build", profile.name, "--venv", str(venv)])
            + "`.",
        )
    return collect_facts(python, facts_request(profile), venv, timeout)


def assess(
    profile: Profile,
    venv: Path,
    facts: VenvFacts,
    shown: Path | None = None,
    *,
    torch: Torch | None = None,
    compat: CompatLookup | None = None,
    gpu: Choice | None = NO_TARGET,
    progress: Progress = quiet,
    built: bool = False,
    look: Callable[[Path], GpuReport] | None = None,
) -> Report:
    """Turn probe facts into checks. ``shown`` is the path to report (after a move);
    ``gpu`` is the GPU the compiled modules are checked for (None: the GPU layer is not
    looked at, doctor does it itself); ``progress`` hears the compat look-up and the GPU
    layer's check begin; ``built``: ``venv`` is the one envkit build has just made;
    ``look``: the GPU layer's report read ahead (:func:`read_ahead`)."""
    prefix = os.path.realpath(venv)
    final = str(shown or venv)

    def show(path: str) -> str:
        if path == prefix or path.startswith(prefix + os.sep):
            return final + path[len(prefix) :]
        return path

    def inside(path: str) -> bool:
        return path == prefix or path.startswith(prefix + os.sep)

    checks: list[Result] = []
    version = facts.version
    fits = Version(version) in profile.python_spec
    rebuild = ["envkit", "build", profile.name, "--python", profile.python]
    checks.append(
        check(
            kind="interpreter",
            name="python",
            status=Severity.OK if fits and facts.prefix == prefix else Severity.ERROR,
            expected=f"Python {profile.python} in {final}",
            found=f"Python {version} at {show(facts.executable)}",
            detail="" if facts.prefix == prefix else f"sys.prefix is {facts.prefix}",
            fix="" if fits else f"rebuild: {shell_command(rebuild)}",
        )
    )
    for dist, expected in sorted(profile.expected_versions().items()):
        checks.append(_version_check(profile, dist, expected, facts, inside, show))
    why = _Why(facts)
    for module, result in facts.imports.items():
        checks.append(_import_check(profile, module, result, inside, show, why))
    for dotted, probed in facts.probes.items():
        ok = probed.ok
        checks.append(
            check(
                kind="probe",
                name=dotted,
                status=Severity.OK if ok else Severity.ERROR,
                expected="present",
                found="present" if ok else "missing",
                detail="" if ok else probed.error,
                fix="" if ok else _probe_fix(profile, probed.module or dotted),
            )
        )
    checks.extend(companion_checks(profile, facts, Path(final)))
    if facts.torch is not None:
        checks.extend(_torch_checks(torch or profile.torch, facts.torch, profile.name))
    pair = {name: facts.copies(name) for name in ("vllm", "transformers")}
    if compat is not None and all(pair.values()):
        vllm, transformers = pair["vllm"][0].version, pair["transformers"][0].version
        progress(f"checking vLLM {vllm} + transformers {transformers} against compat's findings")
        checks.extend(known_bad(pair, compat, [profile]))
    side = None
    site = site_packages(facts.sys_path, prefix) if gpu is not None else None
    if gpu is not None and site is not None:
        progress(reading(gpu))
        found, gpu_report = gpu_checks(site, gpu, profile.name, built=built, look=look)
        checks.extend(found)
        side = gpu_side(gpu_report, gpu.source)
    return Report(
        profile=profile.name, venv=Path(final), python=version, checks=tuple(checks), gpu=side
    )


def _version_check(
    profile: Profile, dist: str, expected: str, facts: VenvFacts, inside: Inside, show: Show
) -> Result:
    copies = facts.copies(canonicalize_name(dist))
    fix = "rebuild: " + shell_command(["envkit", "build", profile.name])
    if not copies:
        return check(
            kind="version",
            name=dist,
            status=Severity.ERROR,
            expected=expected,
            found="not installed",
            fix=fix,
        )
    own = [c for c in copies if inside(c.location)]
    first = (own or copies)[0]
    found = first.version
    try:
        matches = Version(found) in SpecifierSet(f"=={expected}")
    except InvalidVersion:
        matches = found == expected
    detail = ""
    status = Severity.OK if matches and own else Severity.ERROR
    if len(copies) > 1:
        status = Severity.ERROR
        detail = "mixed install, copies: " + "; ".join(
            f"{c.version} in {show(c.location)} (installed by {c.installer or 'unknown'})"
            for c in copies
        )
        fix = "remove the copies outside the venv, or rebuild: " + shell_command(
            ["envkit", "build", profile.name]
        )
    elif not own:
        detail = f"found only outside the venv, in {first.location}"
    elif not found:  # its dist-info folder is there, its METADATA unreadable or without one
        found, detail = (
            "no version",
            "its dist-info's METADATA is missing or gives no version: a damaged install",
        )
    return check(
        kind="version",
        name=dist,
        status=status,
        expected=expected,
        found=found,
        detail=detail,
        fix="" if status is Severity.OK else fix,
    )


class _Why:
    """Explains why a sys.path entry outside the venv is searched at all."""

    def __init__(self, facts: VenvFacts) -> None:
        self.facts = facts

    def __call__(self, entry: str) -> tuple[str, str]:
        if entry in self.facts.pythonpath:
            return "it is on PYTHONPATH", "unset PYTHONPATH (or remove that entry)"
        if entry and entry == self.facts.user_site:
            return "it is the user site-packages (pip install --user)", (
                "remove the user copy (pip uninstall --user), or set PYTHONNOUSERSITE=1"
            )
        if entry in self.facts.site_packages or entry.startswith(self.facts.base_prefix or "\0"):
            return "the venv includes the base interpreter's site-packages", (
                "rebuild without system site-packages: envkit build"
            )
        return "a .pth file or sitecustomize put it on sys.path", "remove that .pth entry"


def _import_check(
    profile: Profile, module: str, result: ImportFacts, inside: Inside, show: Show, why: _Why
) -> Result:
    if not result.ok:
        return check(
            kind="import",
            name=module,
            status=Severity.ERROR,
            expected="imports",
            found="fails",
            detail=result.error,
            fix=f"rebuild: {shell_command(['envkit', 'build', profile.name])}; if it persists the "
            "pins clash",
        )
    file = result.file
    winner = next((c for c in result.copies if file.startswith(c.entry + os.sep)), None)
    if not inside(file):
        reason, fix = why(winner.entry) if winner else ("unknown", "rebuild the venv")
        index = f"sys.path[{winner.index}]" if winner else "sys.path"
        return check(
            kind="import",
            name=module,
            status=Severity.ERROR,
            expected="inside the venv",
            found=file,
            detail=f"mixed install: {index} {winner.entry if winner else ''} wins because {reason}",
            fix=fix,
        )
    others = [c.entry for c in result.copies if not inside(c.entry)]
    seconds = result.seconds
    return check(
        kind="import",
        name=module,
        status=Severity.WARNING if others else Severity.OK,
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
        rebuild = shell_command(["envkit", "build", profile.name])
        return f"the profile pins {pins[0]}; rebuild with `{rebuild}`"
    return f"pin {top} to a version that has it in the profile's constraints, then rebuild"


def _torch_checks(want: Torch, torch: TorchFacts, profile_name: str) -> list[Result]:
    if not torch.ok:
        return [
            check(
                kind="torch",
                name="torch.version.cuda",
                status=Severity.ERROR,
                expected=want.cuda or "importable",
                found="torch does not import",
                detail=torch.error,
                fix=shell_command(["envkit", "build", profile_name]),
            )
        ]
    found = torch.cuda or "none (CPU build)"
    backend = want.backend or "cu" + want.cuda.replace(".", "")
    checks = []
    if want.cuda:
        ok = torch.cuda == want.cuda
        checks.append(
            check(
                kind="torch",
                name="torch.version.cuda",
                status=Severity.OK if ok else Severity.ERROR,
                expected=want.cuda,
                found=str(found),
                detail=f"torch {torch.version}",
                fix=""
                if ok
                else (
                    f"rebuild with --torch-backend {backend}"
                    " (or --torch-index default where the index's torch is that CUDA build)"
                ),
            )
        )
    available = torch.cuda_available
    checks.append(
        check(
            kind="torch",
            name="torch.cuda.is_available()",
            status=Severity.OK if available or not want.cuda else Severity.WARNING,
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
    gpu: Choice | None = NO_TARGET,
    progress: Progress = quiet,
    built: bool = False,
) -> Report:
    """Gather facts in ``venv`` and assess them against ``profile`` (``gpu``: the GPU the
    compiled modules are checked for, :func:`assess`); ``torch`` is the torch
    build to demand when it is not the profile's own (``build --torch-backend``); ``compat``
    looks the installed vLLM + transformers pair up (compat.lookup); ``progress`` hears
    each step begin (the imports, which for vLLM take seconds, then compat and kernels);
    ``built``: ``venv`` is the one envkit build has just made (no fix says to rebuild it)."""
    expected = torch or profile.torch
    imports = ", ".join(profile.checks.imports) or "nothing"
    progress(f"verifying {shown or venv}: importing {imports} in its interpreter (one run)")
    # the GPU layer reads the compiled modules meanwhile, on the core the probe leaves free
    look = read_ahead(venv, gpu.target) if gpu is not None else None
    facts = gather(venv, profile)
    return assess(
        profile,
        venv,
        facts,
        shown,
        torch=expected,
        compat=compat,
        gpu=gpu,
        progress=progress,
        built=built,
        look=look,
    )


def verify_existing(
    profile: Profile,
    venv: Path,
    *,
    compat: CompatLookup | None = None,
    gpu: Choice | None = NO_TARGET,
    progress: Progress = quiet,
    note: Callable[[str], None] = lambda _line: None,
) -> Report:
    """``envkit verify``: an existing venv checked against ``profile`` while its lock is
    held (what a killed envkit left repaired first, each repair said through ``note``).
    An interrupt raises Interrupted saying what is on disk (``VenvSlot.describe``)."""
    from envkit.env.venvslot import VenvSlot
    from envkit.errors import Interrupted

    slot = VenvSlot(venv)
    try:
        with slot.locked(note, existing=profile.name) as recovered:
            for done in recovered:
                note(f"recovered: {done}")
            return verify(profile, slot.venv, compat=compat, gpu=gpu, progress=progress)
    except KeyboardInterrupt:
        raise Interrupted(slot.describe()) from None  # the last line says what is there
