"""``envkit doctor``: what is wrong with this environment and machine, without changing them.

Each finding has a severity (error, warning, info), the evidence it rests on and a fix. The
environment is looked at by one run of ``env/inside_venv.py`` in its interpreter (every distribution
with its location and installer, torch's CUDA build); the machine by ``nvidia-smi`` when it
exists, and by the WSL2 markers. Values of environment variables that look like secrets are
redacted everywhere, in text and JSON.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from envkit.env.checks import CompatLookup, GpuSide, Report, found_of, kind_of
from envkit.env.facts import Installed, collect_facts, venv_python
from envkit.env.gpuchecks import gpu_side, reading, site_packages
from envkit.env.pairs import known_bad
from envkit.env.verify import assess, facts_request
from envkit.errors import BadInput, UnreadableFile
from envkit.gpu.arch import Capability
from envkit.gpu.driver import MIB, Gpu
from envkit.gpu.installed import verdicts
from envkit.gpu.installed.assess import assess as assess_gpu
from envkit.gpu.installed.detect import Choice
from envkit.io.escaping import shell_command
from envkit.io.files import read_small
from envkit.io.redaction import is_secret_variable
from envkit.profiles.profile import Profile
from envkit.progress import Progress, quiet
from envkit.results import Result, Severity, ok

ERROR, WARNING, INFO = Severity.ERROR, Severity.WARNING, Severity.INFO
# a value that holds a credential anywhere: a known token shape, or an option naming one
SECRET_INSIDE = re.compile(
    r"(hf_|sk-|ghp_|gho_|github_pat_|xox[bp]-)[A-Za-z0-9_-]{8,}|"
    r"(api[-_]?key|token|password|secret)\s*[=:\s]\s*\S",
    re.I,
)
RELEVANT_ENV = re.compile(
    r"^(VLLM_|HF_|HUGGING_FACE|CUDA_|NCCL_|TORCH_|PYTORCH_|UV_|PIP_|"
    r"PYTHONPATH$|PYTHONHOME$|VIRTUAL_ENV$|LD_LIBRARY_PATH$|OPENAI_)"
)
HF_XET_MIN = Version("1.1.7")
BF16_MIN = Capability(8, 0)  # vLLM refuses bfloat16 below it


@dataclass(frozen=True, kw_only=True)
class Diagnosis:
    python: str
    prefix: str
    venv: bool
    findings: tuple[Result, ...]
    environment: dict[str, str]
    gpus: tuple[Gpu, ...]  # what nvidia-smi reported
    gpu: GpuSide | None  # what the GPU layer was checked for (None: no torch or vLLM)
    report: Report | None  # drift from the profile, when one was given

    @property
    def ok(self) -> bool:
        return ok(self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "envkit": 2,  # findings are results: evidence holds what was read, not the message
            "ok": self.ok,
            "python": self.python,
            "prefix": self.prefix,
            "venv": self.venv,
            "findings": [{**f.to_dict(), "where": f.subject} for f in self.findings],
            "gpus": [_gpu_dict(g) for g in self.gpus],
            "gpu": self.gpu.to_dict() if self.gpu is not None else None,
            "environment": self.environment,
            "profile": self.report.to_dict() if self.report else None,
        }


def _gpu_dict(gpu: Gpu) -> dict[str, Any]:
    return {
        "index": gpu.index,
        "name": gpu.name,
        "driver": str(gpu.driver),
        "compute_capability": str(gpu.capability),
        "memory_total_mib": gpu.memory // MIB if gpu.memory is not None else None,
        "memory_free_mib": gpu.free // MIB if gpu.free is not None else None,
    }


def redact_env(env: dict[str, str]) -> dict[str, str]:
    """The variables that matter here; the value of any that looks secret (by its name, its
    shape, a credential inside it, a URL with userinfo) is shown as ``***``."""
    out = {}
    for name in sorted(env):
        if not RELEVANT_ENV.match(name):
            continue
        value = env[name]
        secret = is_secret_variable(name, value) or SECRET_INSIDE.search(value)
        out[name] = "***" if secret and value else value
    return out


def target_python(venv: Path | None) -> tuple[Path, Path | None]:
    """The interpreter to inspect: --venv, else ./.venv (the project's, which envkit builds),
    else $VIRTUAL_ENV, else python3 on PATH."""
    for folder in (venv, Path(".venv"), os.environ.get("VIRTUAL_ENV")):
        if folder is None:
            continue
        python = venv_python(Path(folder))
        if python.exists():
            return python, Path(folder)
        if venv is not None and Path(folder) == venv:
            missing = "does not exist" if not os.path.lexists(venv) else None
            raise BadInput(
                f"{str(venv)!r} {missing or f'is not a virtual environment (no {python})'}.",
                "Pass the folder of a venv, or leave out --venv.",
            )
    found = shutil.which("python3") or shutil.which("python")
    if not found:
        raise BadInput("No Python interpreter to inspect: no venv and no python3 on PATH.")
    return Path(found), None


def diagnose(
    venv: Path | None,
    profile: Profile | None,
    compat: CompatLookup | None = None,
    *,
    gpu: Choice,
    profiles: Sequence[Profile] = (),
    progress: Progress = quiet,
) -> Diagnosis:
    """Findings about the environment at ``venv`` (or the one found) and this machine, its
    compiled modules checked for ``gpu``'s target (from the options or nvidia-smi);
    ``profiles`` (the catalog's) give the fixes their pins; ``progress`` hears each step."""
    python, folder = target_python(venv)
    progress(f"inspecting {python} (one run of its interpreter)")
    spec: dict[str, Any] = {"all_distributions": True, "torch_if_installed": True}
    if profile is not None:
        spec.update(facts_request(profile))
        spec["all_distributions"] = True
    facts = collect_facts(python, spec, folder or python.parent)
    findings: list[Result] = []
    report = None
    if profile is not None:
        report = assess(
            profile, folder or Path(facts.prefix), facts, compat=compat, gpu=None,
            progress=progress,
        )  # fmt: skip
        # the pair is said once, below, by the same decision verify made
        findings += [drift(c) for c in report.checks if c.failed and kind_of(c) != "compat"]
    dists = facts.distributions
    side = None
    site = site_packages(facts.sys_path, facts.prefix)
    if site is not None:
        progress(reading(gpu))
        layer = assess_gpu(site, gpu.target)
        found = list(layer.findings)
        if not layer.torch_cuda and facts.torch is not None and facts.torch.cuda:
            found += verdicts.driver(gpu.target, facts.torch.cuda)  # torch said it itself
        findings += [f for f in found if f.severity is not Severity.OK]  # doctor lists problems
        side = gpu_side(layer, gpu.source)
    findings += duplicates(dists)
    if profile is None and dists.get("vllm") and dists.get("transformers"):
        progress("checking the installed vLLM + transformers against compat's findings")
    pair = known_bad(dists, compat, [*([profile] if profile else []), *profiles])
    findings += [f for f in pair if f.severity is not Severity.OK]
    gpus = gpu.smi.gpus if gpu.smi is not None else ()
    findings += machine_findings(gpu)
    findings += wsl_findings(os.environ)
    findings += xet_findings(dists, os.environ)
    if not facts.is_venv:
        findings.append(
            Result(
                severity=WARNING,
                code="not-a-venv",
                message=(f"{facts.executable} is a system interpreter (sys.prefix {facts.prefix})"),
                fix=(
                    f"work in a venv: envkit build {profile.name}"
                    if profile
                    else "work in a venv: envkit build PROFILE (envkit profiles lists them)"
                ),
            )
        )
    return Diagnosis(
        python=facts.executable,
        prefix=facts.prefix,
        venv=facts.is_venv,
        findings=tuple(findings),
        environment=redact_env(dict(os.environ)),
        gpus=gpus,
        gpu=side,
        report=report,
    )


def drift(check: Result) -> Result:
    """A failing check of verify as doctor lists it: the same result, under ``drift-KIND``
    and with what was found and expected in its sentence."""
    expected, detail = check.fact("expected"), check.message
    return replace(
        check,
        code=f"drift-{kind_of(check)}",
        message=f"{check.subject or check.code}: {found_of(check)} (profile: {expected})"
        + (f"; {detail}" if detail else ""),
    )


def _without_editable_sources(copies: Sequence[Installed]) -> list[Installed]:
    """An editable install is one copy: its project's own build metadata (``src/*.egg-info``,
    what ``pip install -e .`` leaves in the source tree) is not a second one."""
    projects = {(c.editable, c.version) for c in copies if c.editable}
    return [
        c
        for c in copies
        if c.editable
        or not any(
            c.version == version and Path(c.location).is_relative_to(Path(project))
            for project, version in projects
        )
    ]


def duplicates(dists: Mapping[str, Sequence[Installed]]) -> list[Result]:
    """Distributions visible more than once on sys.path (pip and uv, or a user site)."""
    out = []
    for name, found in sorted(dists.items()):
        copies = _without_editable_sources(found)
        if len(copies) < 2:
            continue
        where = "; ".join(
            f"{c.version} in {c.location} (installer: {c.installer or 'unknown'})" for c in copies
        )
        installers = {c.installer for c in copies if c.installer}
        mixed = " by different installers" if len(installers) > 1 else ""
        versions = {c.version for c in copies}
        out.append(
            Result(
                severity=ERROR if len(versions) > 1 else WARNING,
                code="duplicate-distribution",
                message=(
                    f"{name} is installed {len(copies)} times{mixed}: {where}; the first on "
                    "sys.path shadows the others"
                ),
                fix="keep one copy: remove the others ("
                + shell_command(["pip", "uninstall", name])
                + " with the interpreter that installed it), or rebuild the venv with envkit build",
            )
        )
    return out


def machine_findings(gpu: Choice) -> list[Result]:
    """What nvidia-smi said, or that it was not there or not readable; a card below compute
    capability 8.0 has no bfloat16."""
    out = []
    smi = gpu.smi
    if smi is not None and smi.problem:
        out.append(
            Result(
                severity=WARNING,
                code="nvidia-smi-unreadable",
                message=f"nvidia-smi is installed but its answer could not be used: {smi.problem}",
                fix="run nvidia-smi by hand; a driver in a bad state needs a reboot or "
                "reinstall, or name the GPU: --gpu NAME or --compute-capability X.Y",
            )
        )
    elif smi is not None and not smi.gpus:
        out.append(
            Result(
                severity=INFO,
                code="no-nvidia-driver",
                message="no NVIDIA driver found (nvidia-smi is not on PATH or lists no GPU)",
                fix="fine for building; serving needs an NVIDIA GPU and driver",
            )
        )
    target = gpu.target
    if target is not None and target.capability < BF16_MIN:
        out.append(
            Result(
                severity=WARNING,
                code="no-bfloat16",
                message=f"{target.name or 'the GPU'} has compute capability "
                f"{target.capability}: no bfloat16",
                fix="serve bfloat16 checkpoints with --dtype float16 (envkit plan does)",
            )
        )
    return out


def wsl_findings(env: Mapping[str, str]) -> list[Result]:
    try:
        kernel = read_small(Path("/proc/version"), 64 * 1024).decode("utf-8", "replace").lower()
    except UnreadableFile:
        kernel = ""
    if not ("microsoft" in kernel or env.get("WSL_DISTRO_NAME") or env.get("WSL_INTEROP")):
        return []
    value = env.get("VLLM_WSL2_ENABLE_PIN_MEMORY")
    return [
        Result(
            severity=WARNING,
            code="wsl2-pinned-memory",
            message=(
                "WSL2: GPU paravirtualisation gives no pinned host memory by default (vLLM's "
                "V1 engine then fails with 'UVA is not available'); VLLM_WSL2_ENABLE_PIN_MEMORY is "
                + (repr(value) if value is not None else "not set")
            ),
            fix="set VLLM_WSL2_ENABLE_PIN_MEMORY=1 and compare two boot logs (on, off) to see "
            "whether your vLLM reads it",
        )
    ]


def xet_findings(dists: Mapping[str, Sequence[Installed]], env: Mapping[str, str]) -> list[Result]:
    copies = dists.get("hf-xet", ())
    disabled = env.get("HF_HUB_DISABLE_XET")
    if not copies:
        return []
    try:
        version = Version(copies[0].version)
    except InvalidVersion:
        return []
    if version < HF_XET_MIN and not disabled:
        return [
            Result(
                severity=WARNING,
                code="old-hf-xet",
                message=(
                    f"hf-xet {version} is older than {HF_XET_MIN}; downloads can fail with "
                    "'CAS Client Error: HTTP 401'"
                ),
                fix=f"upgrade hf-xet to >={HF_XET_MIN}, or set HF_HUB_DISABLE_XET=1",
            )
        ]
    if disabled:
        return [
            Result(
                severity=INFO,
                code="xet-disabled",
                message=f"HF_HUB_DISABLE_XET={disabled}: downloads skip the Xet backend",
            )
        ]
    return []
