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
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from envkit.env.facts import collect_facts, venv_python
from envkit.env.verify import CompatLookup, Report, Status, assess, facts_request
from envkit.errors import BadInput
from envkit.findings import Finding, Severity
from envkit.gpu import linkage
from envkit.io import process
from envkit.io.redaction import is_secret_variable
from envkit.profiles.profile import Profile

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


@dataclass(frozen=True, kw_only=True)
class Diagnosis:
    python: str
    prefix: str
    venv: bool
    findings: tuple[Finding, ...]
    environment: dict[str, str]
    gpus: tuple[dict[str, str], ...]
    report: Report | None  # drift from the profile, when one was given

    @property
    def ok(self) -> bool:
        return not any(f.severity == ERROR for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "python": self.python,
            "prefix": self.prefix,
            "venv": self.venv,
            # "evidence": the message under its name of JSON format 1, kept for readers of it
            "findings": [{**f.to_dict(), "evidence": f.message} for f in self.findings],
            "gpus": list(self.gpus),
            "environment": self.environment,
            "profile": self.report.to_dict() if self.report else None,
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
            raise BadInput(
                f"{str(venv)!r} is not a virtual environment (no {python}).",
                "Pass the folder of a venv, or leave out --venv.",
            )
    found = shutil.which("python3") or shutil.which("python")
    if not found:
        raise BadInput("No Python interpreter to inspect: no venv and no python3 on PATH.")
    return Path(found), None


def diagnose(
    venv: Path | None, profile: Profile | None, compat: CompatLookup | None = None
) -> Diagnosis:
    python, folder = target_python(venv)
    spec: dict[str, Any] = {"all_distributions": True, "torch_if_installed": True}
    if profile is not None:
        spec.update(facts_request(profile))
        spec["all_distributions"] = True
    facts = collect_facts(python, spec, folder or python.parent)
    findings: list[Finding] = []
    report = None
    if profile is not None:
        report = assess(profile, folder or Path(facts["prefix"]), facts, compat=compat)
        findings += [
            Finding(
                severity=ERROR,
                code=f"drift-{c.kind}",
                message=(
                    f"{c.name}: {c.found} (profile: {c.expected})"
                    + (f"; {c.detail}" if c.detail else "")
                ),
                fix=c.fix,
            )
            for c in report.checks
            if c.status is Status.FAIL
        ]
    dists = facts.get("distributions", {})
    if profile is None:  # with one, verify's kernels check spoke above
        findings += linkage.findings(facts.get("sys_path", []))
    findings += duplicates(dists)
    findings += known_bad(dists, compat)
    gpus, driver_cuda = nvidia()
    findings += cuda_findings(facts.get("torch"), gpus, driver_cuda)
    findings += wsl_findings(os.environ)
    findings += xet_findings(dists, os.environ)
    if facts["prefix"] == facts["base_prefix"]:
        findings.append(
            Finding(
                severity=WARNING,
                code="not-a-venv",
                message=(
                    f"{facts['executable']} is a system interpreter (sys.prefix {facts['prefix']})"
                ),
                fix="work in a venv: envkit build PROFILE",
            )
        )
    return Diagnosis(
        python=str(facts["executable"]),
        prefix=str(facts["prefix"]),
        venv=facts["prefix"] != facts["base_prefix"],
        findings=tuple(findings),
        environment=redact_env(dict(os.environ)),
        gpus=tuple(gpus),
        report=report,
    )


def _without_editable_sources(copies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An editable install is one copy: its project's own build metadata (``src/*.egg-info``,
    what ``pip install -e .`` leaves in the source tree) is not a second one."""
    projects = {(c["editable"], c["version"]) for c in copies if c.get("editable")}
    return [
        c
        for c in copies
        if c.get("editable")
        or not any(
            c["version"] == version and Path(c["location"]).is_relative_to(Path(project))
            for project, version in projects
        )
    ]


def duplicates(dists: dict[str, list[dict[str, Any]]]) -> list[Finding]:
    """Distributions visible more than once on sys.path (pip and uv, or a user site)."""
    out = []
    for name, found in sorted(dists.items()):
        copies = _without_editable_sources(found)
        if len(copies) < 2:
            continue
        where = "; ".join(
            f"{c['version']} in {c['location']} (installer: {c['installer'] or 'unknown'})"
            for c in copies
        )
        installers = {c["installer"] for c in copies if c["installer"]}
        mixed = " by different installers" if len(installers) > 1 else ""
        versions = {c["version"] for c in copies}
        out.append(
            Finding(
                severity=ERROR if len(versions) > 1 else WARNING,
                code="duplicate-distribution",
                message=(
                    f"{name} is installed {len(copies)} times{mixed}: {where}; the first on "
                    "sys.path shadows the others"
                ),
                fix=f"keep one copy: remove the others (pip uninstall {name} with the interpreter "
                "that installed it), or rebuild the venv with envkit build",
            )
        )
    return out


def known_bad(
    dists: dict[str, list[dict[str, Any]]], compat: CompatLookup | None = None
) -> list[Finding]:
    """vLLM with a transformers its own metadata excludes, or whose API it lacks.

    With ``compat``, the installed pair is looked up in `envkit compat`'s findings (the
    transformers names and attributes this vLLM uses that this transformers lacks). Without
    it, or when the wheels cannot be read: a vLLM whose requirement is ``transformers>=4.x``
    with no upper bound predates transformers 5 (vLLM 0.8 to 0.10) and breaks on it.
    """
    vllm, transformers = dists.get("vllm", []), dists.get("transformers", [])
    if not vllm or not transformers:
        return []
    violated = _requirement_findings(vllm, transformers)
    if violated or compat is None:
        return violated or _predates_5(vllm, transformers)
    found = compat(str(vllm[0]["version"]), str(transformers[0]["version"]))
    if isinstance(found, str):  # no verdict from the wheels: fall back to the rule
        return _predates_5(vllm, transformers)
    core = [f for f in found.findings if f.everywhere]
    if not core:
        return []
    named = "; ".join(f"{f.code.value} {f.name} at {f.file}:{f.line}" for f in core[:3])
    return [
        Finding(
            severity=ERROR,
            code="known-bad-pair",
            message=f"vllm {found.vllm} + transformers {found.transformers} is not compatible: "
            f"{named}" + (f" (and {len(core) - 3} more)" if len(core) > 3 else ""),
            fix=f"pin the transformers a profile pins for vLLM {found.vllm} (envkit compat "
            f"vllm=={found.vllm} transformers=={found.transformers} lists what breaks)",
        )
    ]


def _pair(
    vllm: list[dict[str, Any]], transformers: list[dict[str, Any]]
) -> tuple[Version, SpecifierSet] | None:
    """The installed transformers and the range vLLM's metadata declares for it."""
    try:
        have = Version(transformers[0]["version"])
    except InvalidVersion:
        return None
    for line in vllm[0].get("requires", []):
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.name.lower() == "transformers" and not (req.marker and "extra" in str(req.marker)):
            return have, req.specifier
    return None


def _requirement_findings(
    vllm: list[dict[str, Any]], transformers: list[dict[str, Any]]
) -> list[Finding]:
    """The installed transformers outside the range vLLM's metadata declares."""
    pair = _pair(vllm, transformers)
    if pair is None or pair[0] in pair[1]:
        return []
    have, spec = pair
    return [
        Finding(
            severity=ERROR,
            code="requirement-violated",
            message=f"vllm {vllm[0]['version']} requires transformers{spec}; {have} is installed",
            fix=f"install a transformers that fits: {spec}",
        )
    ]


def _predates_5(vllm: list[dict[str, Any]], transformers: list[dict[str, Any]]) -> list[Finding]:
    """The rule without the wheels: an uncapped vLLM from before transformers 5, on 5.x."""
    pair = _pair(vllm, transformers)
    if pair is None:
        return []
    have, spec = pair
    uncapped = not any(s.operator in ("<", "<=", "==", "~=") for s in spec)
    predates = all(Version(s.version).major < 5 for s in spec if s.operator in (">=", ">"))
    if not (have.major >= 5 and uncapped and predates):
        return []
    return [
        Finding(
            severity=ERROR,
            code="known-bad-pair",
            message=(
                f"vllm {vllm[0]['version']} requires transformers{spec}; {have} is installed: "
                "this vLLM predates transformers 5 and breaks on it (tokenizers lost "
                "all_special_tokens_extended)"
            ),
            fix="pin transformers<5 (the profile's pin), e.g. envkit build vllm-0.8.5+qwen2-vl",
        )
    ]


def nvidia() -> tuple[list[dict[str, str]], str]:
    """GPUs and the driver's highest CUDA version, from nvidia-smi ([] and '' without it)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return [], ""
    try:
        listing = process.run(
            [
                smi,
                "--query-gpu=name,driver_version,memory.total,memory.free,compute_cap",
                "--format=csv,noheader,nounits",
            ],
            timeout=20,
        )
        header = process.run([smi], timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return [], ""
    gpus = []
    for line in listing.stdout.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == 5:
            gpus.append(
                dict(
                    zip(
                        (
                            "name",
                            "driver",
                            "memory_total_mib",
                            "memory_free_mib",
                            "compute_capability",
                        ),
                        cells,
                        strict=True,
                    )
                )
            )
    match = re.search(r"CUDA Version:\s*([0-9]+\.[0-9]+)", header.stdout)
    return gpus, match.group(1) if match else ""


def cuda_findings(
    torch: dict[str, Any] | None, gpus: list[dict[str, str]], driver_cuda: str
) -> list[Finding]:
    out = []
    if not gpus:
        out.append(
            Finding(
                severity=INFO,
                code="no-nvidia-driver",
                message="no NVIDIA driver found (nvidia-smi is not on PATH or lists no GPU)",
                fix="fine for building; serving needs an NVIDIA GPU and driver",
            )
        )
    built = str(torch.get("cuda") or "") if torch and torch.get("ok") else ""
    if built and driver_cuda and Version(built) > Version(driver_cuda):
        out.append(
            Finding(
                severity=ERROR,
                code="driver-too-old",
                message=(
                    f"torch {torch.get('version') if torch else ''} is built for CUDA {built}; the "
                    f"driver supports CUDA {driver_cuda} at most"
                ),
                fix="update the NVIDIA driver, or use a profile whose torch is built for CUDA "
                f"{driver_cuda} or older",
            )
        )
    for gpu in gpus:
        try:
            capability = Version(gpu["compute_capability"])
        except InvalidVersion:
            continue
        if capability < Version("8.0"):
            out.append(
                Finding(
                    severity=WARNING,
                    code="no-bfloat16",
                    message=(f"{gpu['name']} has compute capability {capability}: no bfloat16"),
                    fix="serve bfloat16 checkpoints with --dtype float16 (envkit plan does)",
                )
            )
    return out


def wsl_findings(env: Mapping[str, str]) -> list[Finding]:
    try:
        kernel = Path("/proc/version").read_text(encoding="utf-8", errors="replace").lower()
    except OSError:
        kernel = ""
    if not ("microsoft" in kernel or env.get("WSL_DISTRO_NAME") or env.get("WSL_INTEROP")):
        return []
    value = env.get("VLLM_WSL2_ENABLE_PIN_MEMORY")
    return [
        Finding(
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


def xet_findings(dists: dict[str, list[dict[str, Any]]], env: Mapping[str, str]) -> list[Finding]:
    copies = dists.get("hf-xet", [])
    disabled = env.get("HF_HUB_DISABLE_XET")
    if not copies:
        return []
    try:
        version = Version(copies[0]["version"])
    except InvalidVersion:
        return []
    if version < HF_XET_MIN and not disabled:
        return [
            Finding(
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
            Finding(
                severity=INFO,
                code="xet-disabled",
                message=f"HF_HUB_DISABLE_XET={disabled}: downloads skip the Xet backend",
            )
        ]
    return []
