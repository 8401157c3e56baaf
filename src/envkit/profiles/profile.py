"""Profiles: what an environment must contain and what must be true after install.

A profile is one TOML file (format: docs/profiles.md). TOML is read here, at the edge, and
turned into a frozen :class:`Profile`; every problem in a file is collected and reported at
once, each with its key path and line.
"""

from __future__ import annotations

import difflib
import hashlib
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envkit.errors import Problem, ProfileError, UnreadableFile
from envkit.io.files import read_small_text
from envkit.profiles import servetable, tomldoc
from envkit.profiles.bounds import Bound
from envkit.profiles.tomlfields import (
    KeyLines,
    Report,
    check_shape,
    is_timestamp,
    is_version,
    name_list,
    requirement_list,
    sub_table,
    text_map,
    text_value,
    version_value,
)

# ASCII only: Python's \d also matches other scripts' digits ('٣.١٢'), which no tool takes.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$")
BACKEND_RE = re.compile(r"^(cpu|cu[0-9]{3}|rocm[0-9]+(\.[0-9]+)*|xpu)$")
CUDA_RE = re.compile(r"^[0-9]+\.[0-9]+$")
MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
MINOR_RE = re.compile(r"^[0-9]+\.[0-9]+$")
MAX_PROFILE_BYTES = 1024 * 1024

# The schema: table -> key -> expected Python type of the value.
SCHEMA: dict[str, dict[str, type | tuple[type, ...]]] = {
    "": {
        "description": str,
        "python": str,
        "requirements": list,
        "constraints": list,
        "exclude_newer": str,
        "torch": dict,
        "verify": dict,
        "models": dict,
        "matrix": dict,
        "serve": dict,
    },
    "serve": servetable.SCHEMA,
    "torch": {"backend": str, "cuda": str},
    "matrix": {"python": list, "platforms": list, "backends": list},
    "verify": {"versions": dict, "imports": list, "probes": list},
    "models": {
        "vllm": str,
        "transformers": str,
        "model_types": list,
        "vllm_model_types": list,
        "architectures": list,
        "previously_supported": dict,
        "out_of_tree": dict,
        "transformers_bounds": dict,
        "source": str,
    },
}
REQUIRED = {"": ("python", "requirements")}


@dataclass(frozen=True, slots=True, kw_only=True)
class Torch:
    """The torch build a profile demands: uv's ``--torch-backend`` and the CUDA it reports."""

    backend: str = ""
    cuda: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Checks:
    """What verification must find inside the environment."""

    versions: Mapping[str, str] = field(default_factory=dict)
    imports: tuple[str, ...] = ()
    probes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Models:
    """What the profile can load, as scanned from its pinned releases (``envkit scan --update``).

    ``model_types`` are the config.json ``model_type`` values that load: those the pinned
    transformers knows plus ``vllm_model_types``, for which vLLM ships its own config class.
    ``architectures`` are the pinned vLLM's model registry keys.
    """

    vllm: str = ""
    transformers: str = ""
    model_types: tuple[str, ...] = ()
    vllm_model_types: tuple[str, ...] = ()
    architectures: tuple[str, ...] = ()
    previously_supported: Mapping[str, str] = field(default_factory=dict)
    out_of_tree: Mapping[str, str] = field(default_factory=dict)
    # architectures vLLM's own tests skip with the pinned transformers (bounds.py)
    transformers_bounds: Mapping[str, Bound] = field(default_factory=dict)
    source: str = ""


# Matrix platform -> uv --python-platform. Linux cells target glibc 2.35 (Ubuntu 22.04):
# the oldest glibc of today's GPU hosts, new enough for the manylinux_2_31 wheels recent
# vLLM releases publish (an older baseline would resolve them to source distributions).
PLATFORMS = {
    "linux-x86_64": "x86_64-manylinux_2_35",
    "linux-aarch64": "aarch64-manylinux_2_35",
    "macos-arm64": "aarch64-apple-darwin",
    "windows-x86_64": "x86_64-pc-windows-msvc",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Matrix:
    """The lock axes: every combination is a cell (see lock/cells.py)."""

    python: tuple[str, ...] = ()
    platforms: tuple[str, ...] = ("linux-x86_64",)
    backends: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    name: str
    path: Path
    description: str
    python: str
    requirements: tuple[str, ...]
    constraints: tuple[str, ...] = ()
    exclude_newer: str = ""
    torch: Torch = field(default_factory=Torch)
    checks: Checks = field(default_factory=Checks)
    models: Models = field(default_factory=Models)
    matrix: Matrix = field(default_factory=Matrix)
    serve: servetable.Serve = field(default_factory=servetable.Serve)  # [serve]

    @property
    def python_spec(self) -> SpecifierSet:
        return python_specifier(self.python)

    def expected_versions(self) -> dict[str, str]:
        """Exact versions to verify: every ``==`` pin, then ``[verify].versions`` on top."""
        found: dict[str, str] = {}
        for text in (*self.requirements, *self.constraints):
            req = Requirement(text)
            specs = list(req.specifier)
            if (
                len(specs) == 1
                and specs[0].operator in ("==", "===")
                and "*" not in specs[0].version
            ):
                found[canonicalize_name(req.name)] = specs[0].version
        for name, version in self.checks.versions.items():
            found[canonicalize_name(name)] = version
        return found

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": str(self.path),
            "description": self.description,
            "python": self.python,
            "requirements": list(self.requirements),
            "constraints": list(self.constraints),
            "exclude_newer": self.exclude_newer or None,
            "torch": {"backend": self.torch.backend or None, "cuda": self.torch.cuda or None},
            "verify": {
                "versions": self.expected_versions(),
                "imports": list(self.checks.imports),
                "probes": list(self.checks.probes),
            },
            "models": {
                "vllm": self.models.vllm or None,
                "transformers": self.models.transformers or None,
                "model_types": list(self.models.model_types),
                "vllm_model_types": list(self.models.vllm_model_types),
                "architectures": list(self.models.architectures),
                "previously_supported": dict(self.models.previously_supported),
                "out_of_tree": dict(self.models.out_of_tree),
                "transformers_bounds": {
                    k: b.to_dict() for k, b in sorted(self.models.transformers_bounds.items())
                },
                "source": self.models.source or None,
            },
            **({"serve": self.serve.to_dict()} if self.serve.args or self.serve.env else {}),
        }


def python_specifier(text: str) -> SpecifierSet:
    """``3.12`` means any 3.12.x, ``3.12.1`` exactly that; anything else is a PEP 440 specifier."""
    text = text.strip()
    if not text.isascii():
        raise InvalidSpecifier(f"{text!r} holds characters other than ASCII")
    if MINOR_RE.fullmatch(text):
        return SpecifierSet(f"=={text}.*")
    if re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", text):
        return SpecifierSet(f"=={text}")
    return SpecifierSet(text)


def cuda_for_backend(backend: str) -> str:
    """The CUDA version a ``cuXYZ`` backend stands for (cu124 -> 12.4); empty otherwise."""
    if re.fullmatch(r"cu[0-9]{3}", backend):
        digits = backend[2:]
        return f"{int(digits[:-1])}.{digits[-1]}"
    return ""


def load_profile(path: Path, name: str | None = None) -> Profile:
    """Read and validate one profile file. Raises :class:`ProfileError` listing every problem."""
    shown = str(path)
    try:  # a regular file within the cap, checked before reading (never a FIFO or a device)
        text = read_small_text(path, MAX_PROFILE_BYTES, what="profile")
    except UnreadableFile as exc:
        reason = "file not found" if exc.kind == "missing" else exc.reason
        raise ProfileError([Problem(shown, "", reason)]) from None
    if "\x00" in text:
        raise ProfileError([Problem(shown, "", "contains NUL bytes (binary file?)")])
    return parse_profile(text, path=path, name=name or path.stem)


def parse_profile(text: str, *, path: Path, name: str) -> Profile:
    """Validate a profile's text. Raises ProfileError, and nothing else, for any text.

    A text met before in this process (same characters, path and name) gives the same frozen
    Profile again without parsing: a command that lists profiles and then resolves one reads
    the same files twice. A text met before on this machine is not parsed by tomlkit again
    (``tomldoc``: its document comes from envkit's cache, and is validated as ever)."""
    # keyed by the text's digest, so the cache holds no file's text; a ProfileError is not
    # kept (it is raised each time)
    key = (hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest(), path, name)
    with _PARSED_LOCK:
        known = _PARSED.get(key)
    if known is not None:
        return known
    profile = _parse(text, path, name)
    with _PARSED_LOCK:
        if len(_PARSED) >= _PARSED_MAX:
            del _PARSED[next(iter(_PARSED))]  # the oldest
        _PARSED[key] = profile
    return profile


_PARSED: dict[tuple[bytes, Path, str], Profile] = {}
_PARSED_MAX = 64
_PARSED_LOCK = threading.Lock()


def _parse(text: str, path: Path, name: str) -> Profile:
    shown = str(path)
    doc, parsed_now = tomldoc.parse(text, shown)  # tomlkit only for a text not met before
    try:
        profile = _validate(doc, text, shown, path, name)
    except (ValueError, TypeError, RecursionError) as exc:  # a case the checks below missed
        raise ProfileError([Problem(shown, "", f"cannot be read as a profile: {exc}")]) from None
    if parsed_now:
        tomldoc.store(text, doc)
    return profile


def _validate(doc: dict[str, Any], text: str, shown: str, path: Path, name: str) -> Profile:
    """Every section checked in turn; all problems are collected before one ProfileError."""
    lines = KeyLines(text)
    problems: list[Problem] = []

    def problem(key: str, message: str) -> None:
        problems.append(Problem(shown, key, message, lines.find(key)))

    if not NAME_RE.fullmatch(name):
        problem("", f"profile name {name!r} may hold only letters, digits, '.', '_', '+', '-'")
    check_shape(doc, SCHEMA, "", problem)
    for key in REQUIRED[""]:
        if key not in doc:
            problem(key, f"required key '{key}' is missing")
    python = _python(doc, problem)
    requirements = requirement_list(doc, "requirements", problem)
    constraints = requirement_list(doc, "constraints", problem)
    if "requirements" in doc and not requirements and isinstance(doc["requirements"], list):
        problem("requirements", "must list at least one requirement")
    exclude_newer = text_value(doc, "exclude_newer")
    if exclude_newer and not is_timestamp(exclude_newer):
        problem(
            "exclude_newer",
            f"{exclude_newer!r} is not a date or time stamp such as '2025-05-20' or "
            "'2025-05-20T00:00:00Z'",
        )
    torch = _torch(sub_table(doc, "torch"), problem)
    checks = _checks(sub_table(doc, "verify"), problem)
    models = _models(sub_table(doc, "models"), problem)
    matrix = _matrix(doc, python, torch.backend, problem)
    serve = servetable.serve_table(doc, problem)
    if problems:
        raise ProfileError(problems)
    return Profile(
        name=name,
        path=path,
        description=text_value(doc, "description"),
        python=python,
        requirements=requirements,
        constraints=constraints,
        exclude_newer=exclude_newer,
        torch=torch,
        checks=checks,
        models=models,
        matrix=matrix,
        serve=serve,
    )


def _python(doc: Mapping[str, Any], problem: Report) -> str:
    python = doc.get("python", "")
    if not isinstance(python, str):
        return ""
    if python:
        try:
            python_specifier(python)
        except InvalidSpecifier:
            problem("python", f"{python!r} is not a Python version ('3.12') or specifier")
    return python


def _torch(torch_doc: Mapping[str, Any], problem: Report) -> Torch:
    backend = text_value(torch_doc, "backend")
    if backend and not BACKEND_RE.fullmatch(backend):
        problem("torch.backend", f"{backend!r} is not a torch backend (cpu, cu124, rocm6.2, xpu)")
    cuda = text_value(torch_doc, "cuda") or cuda_for_backend(backend)
    if cuda and not CUDA_RE.fullmatch(cuda):
        problem("torch.cuda", f"{cuda!r} is not a CUDA version such as '12.4'")
    elif cuda and cuda_for_backend(backend) and cuda != cuda_for_backend(backend):
        problem("torch.cuda", f"{cuda!r} disagrees with backend {backend!r}")
    return Torch(backend=backend, cuda=cuda)


def _checks(verify_doc: Mapping[str, Any], problem: Report) -> Checks:
    versions: dict[str, str] = {}
    for dist, version in sub_table(verify_doc, "versions").items():
        if not isinstance(version, str):
            problem(f"verify.versions.{dist}", "must be a version string")
            continue
        try:
            Version(version)
        except InvalidVersion:
            problem(f"verify.versions.{dist}", f"{version!r} is not a valid version")
        versions[str(dist)] = version
    imports = name_list(verify_doc, "verify.imports", problem, MODULE_RE, "a module name")
    probes = name_list(verify_doc, "verify.probes", problem, MODULE_RE, "a dotted name")
    for probe in probes:
        if "." not in probe:
            problem("verify.probes", f"{probe!r} must be module.attribute")
    return Checks(versions=versions, imports=imports, probes=probes)


def _models(models_doc: Mapping[str, Any], problem: Report) -> Models:
    return Models(
        vllm=version_value(models_doc, "models.vllm", problem),
        transformers=version_value(models_doc, "models.transformers", problem),
        model_types=name_list(models_doc, "models.model_types", problem),
        vllm_model_types=name_list(models_doc, "models.vllm_model_types", problem),
        architectures=name_list(models_doc, "models.architectures", problem),
        previously_supported=text_map(models_doc, "models.previously_supported", problem),
        out_of_tree=text_map(models_doc, "models.out_of_tree", problem),
        transformers_bounds=_bounds(sub_table(models_doc, "transformers_bounds"), problem),
        source=text_value(models_doc, "source"),
    )


def _bounds(table: Mapping[str, Any], problem: Report) -> dict[str, Bound]:
    """``Arch = { min = "4.52", max = "", reason = "...", example = "org/name" }``."""
    out: dict[str, Bound] = {}
    for arch, value in table.items():
        where = f"models.transformers_bounds.{arch}"
        if not isinstance(value, Mapping):
            problem(where, 'must be a table such as { min = "4.52", reason = "..." }')
            continue
        unknown = set(value) - {"min", "max", "reason", "example", "hf_only"}
        if unknown:
            known = "min, max, reason, example, hf_only"
            problem(where, f"unknown key(s) {', '.join(sorted(unknown))} ({known})")
        if not all(isinstance(v, str) for v in value.values()):
            problem(where, "values must be strings")
            continue
        for key in ("min", "max"):
            text = value.get(key, "")
            if text and not (text.isascii() and is_version(text)):
                problem(f"{where}.{key}", f"{text!r} is not a version")
        directions = [d for d in value.get("hf_only", "").split(",") if d]
        if any(d not in ("min", "max") for d in directions):
            problem(f"{where}.hf_only", 'must be "min", "max" or "min,max"')
        out[str(arch)] = Bound.from_dict(str(arch), value)
    return out


def minor_fits(spec: SpecifierSet, minor: str) -> bool:
    """Whether some release of Python ``minor`` ('3.12') satisfies ``spec``."""
    return Version(f"{minor}.0") in spec or Version(f"{minor}.99") in spec


def _matrix(doc: Mapping[str, Any], python: str, backend: str, problem: Report) -> Matrix:
    matrix_doc = sub_table(doc, "matrix")
    pythons = name_list(matrix_doc, "matrix.python", problem)
    spec = _safe_spec(python) if python else None
    for version in pythons:
        if not MINOR_RE.fullmatch(version):
            problem("matrix.python", f"{version!r} is not a Python version such as '3.12'")
        elif spec is not None and not minor_fits(spec, version):
            problem("matrix.python", f"Python {version} does not fit python = {python!r}")
    platforms = name_list(matrix_doc, "matrix.platforms", problem)
    for plat in platforms:
        if plat not in PLATFORMS:
            close = difflib.get_close_matches(plat, list(PLATFORMS), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f" (one of {', '.join(PLATFORMS)})"
            problem("matrix.platforms", f"unknown platform {plat!r}{hint}")
    backends = name_list(matrix_doc, "matrix.backends", problem)
    for each in backends:
        if not BACKEND_RE.fullmatch(each):
            problem("matrix.backends", f"{each!r} is not a torch backend")
    if not pythons and not MINOR_RE.fullmatch(python) and python and "matrix" in doc:
        problem("matrix.python", "list the Python versions to lock (python is a range)")
    return Matrix(
        python=pythons or ((python,) if python else ()),
        platforms=platforms or ("linux-x86_64",),
        backends=backends or ((backend,) if backend else ()),
    )


def _safe_spec(text: str) -> SpecifierSet:
    try:
        return python_specifier(text)
    except InvalidSpecifier:
        return SpecifierSet()
