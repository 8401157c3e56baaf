"""Profiles: what an environment must contain and what must be true after install.

A profile is one TOML file (format: docs/profiles.md). TOML is read here, at the edge, and
turned into a frozen :class:`Profile`; every problem in a file is collected and reported at
once, each with its key path and line.
"""

from __future__ import annotations

import functools
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
from packaging.version import Version

from envkit.errors import BadInput, Problem, ProfileError, UnreadableFile
from envkit.io.files import read_small_text
from envkit.profiles import keys, servetable, tomldoc
from envkit.profiles.bounds import Bound
from envkit.profiles.forms import CUDA, MINOR, PLATFORMS, python_specifier
from envkit.profiles.keys import Report
from envkit.profiles.tomlfields import (
    KeyLines,
    requirement_list,
    strings,
    sub_table,
    text_map,
    text_value,
)

# ASCII only: Python's \d also matches other scripts' digits ('٣.١٢'), which no tool takes.
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,99}$")
MAX_PROFILE_BYTES = 1024 * 1024
# The two releases a profile must pin exactly for compat, scan --update, the site, lock's
# refusals and the model tables: one rule (Profile.pair), one message (Profile.require_pair).
PAIR = ("vllm", "transformers")
__all__ = ["PLATFORMS", "python_specifier"]  # read from here by lock, env and models


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
    digest: str = ""  # content_digest of the text it was read from, read once
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

    def pair(self) -> tuple[str, str] | None:
        """The vLLM and transformers releases this profile pins exactly (``==`` in
        requirements or constraints, or ``[verify].versions``); None unless it pins both."""
        pins = self.expected_versions()
        vllm, transformers = (pins.get(n, "") for n in PAIR)
        return (vllm, transformers) if vllm and transformers else None

    def require_pair(self) -> tuple[Version, Version]:
        """:meth:`pair`, or BadInput naming what is missing (the one message for it)."""
        pair = self.pair()
        if pair is None:
            pins = self.expected_versions()
            missing = " or ".join(n for n in PAIR if not pins.get(n))
            raise BadInput(
                f"Profile {self.name} ({self.path}) pins no exact {missing} version.",
                "Pin vllm==X in requirements and transformers==Y in constraints, or give "
                "the pair itself: envkit compat vllm==X transformers==Y.",
            )
        return Version(pair[0]), Version(pair[1])

    @property
    def python_spec(self) -> SpecifierSet:
        return python_specifier(self.python)

    def expected_versions(self) -> dict[str, str]:
        """Exact versions to verify: every ``==`` pin, then ``[verify].versions`` on top."""
        versions = tuple(self.checks.versions.items())
        return dict(_exact_pins((*self.requirements, *self.constraints), versions))

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


@functools.lru_cache(maxsize=256)  # asked of each profile by every lookup of its builds
def _exact_pins(
    requirements: tuple[str, ...], versions: tuple[tuple[str, str], ...]
) -> tuple[tuple[str, str], ...]:
    found: dict[str, str] = {}
    for text in requirements:
        req = Requirement(text)
        specs = list(req.specifier)
        if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
            found[canonicalize_name(req.name)] = specs[0].version
    for name, version in versions:
        found[canonicalize_name(name)] = version
    return tuple(found.items())


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
    the same files twice. A broken one gives a new ProfileError of the same problems (they are
    a pure function of the text, path and name). A text met before on this machine is not
    parsed by tomlkit again (``tomldoc``: its document comes from envkit's cache, and is
    validated as ever); a broken one is never stored there."""
    # keyed by the text's sha256, so the memory holds no file's text
    sha = hashlib.sha256(text.encode("utf-8", "surrogatepass"))
    key = (sha.digest(), path, name)
    with _PARSED_LOCK:
        known = _PARSED.get(key)
    if isinstance(known, Profile):
        return known
    if known is not None:
        raise ProfileError(known)
    try:
        found: Profile | tuple[Problem, ...] = _parse(text, path, name, sha.hexdigest())
    except ProfileError as exc:
        found = exc.problems
    with _PARSED_LOCK:
        if len(_PARSED) >= _PARSED_MAX:
            del _PARSED[next(iter(_PARSED))]  # the oldest
        _PARSED[key] = found
    if isinstance(found, Profile):
        return found
    raise ProfileError(found)


def content_digest(text: str, sha256: str = "") -> str:
    """The profile's digest (``sha256:HEX`` of its text with CRLF read as LF: any edit of
    the file makes its locks stale, a checkout's line endings do not). ``sha256``: the
    hex digest of ``text`` itself, when known, so a text without CRLF is hashed once."""
    if sha256 and "\r\n" not in text:
        return f"sha256:{sha256}"
    data = text.replace("\r\n", "\n").encode("utf-8", "surrogatepass")
    return "sha256:" + hashlib.sha256(data).hexdigest()


_PARSED: dict[tuple[bytes, Path, str], Profile | tuple[Problem, ...]] = {}
_PARSED_MAX = 64
_PARSED_LOCK = threading.Lock()


def _parse(text: str, path: Path, name: str, sha256: str) -> Profile:
    shown = str(path)
    digest = content_digest(text, sha256)
    doc = tomldoc.cached(text, sha256)
    if doc is not None:
        return _checked(doc, text, shown, path, name, digest)
    quick = tomldoc.quick(text)  # tomllib; tomlkit only to say what is wrong
    if quick is not None:
        try:
            profile = _checked(quick, text, shown, path, name, digest)
        except ProfileError:
            pass  # said below, from tomlkit's reading, as ever
        else:
            tomldoc.store(text, quick, sha256)
            return profile
    doc = tomldoc.strict(text, shown)
    profile = _checked(doc, text, shown, path, name, digest)
    tomldoc.store(text, doc, sha256)
    return profile


def _checked(
    doc: dict[str, Any], text: str, shown: str, path: Path, name: str, digest: str
) -> Profile:
    try:
        return _validate(doc, text, shown, path, name, digest)
    except (ValueError, TypeError, RecursionError) as exc:  # a case the checks below missed
        raise ProfileError([Problem(shown, "", f"cannot be read as a profile: {exc}")]) from None


def _validate(
    doc: dict[str, Any], text: str, shown: str, path: Path, name: str, digest: str
) -> Profile:
    """The declaration's check (``keys.check``), then what ties keys together; all problems
    are collected before one ProfileError."""
    lines = KeyLines(text)
    problems: list[Problem] = []

    def problem(key: str, message: str) -> None:
        found = Problem(shown, key, message, lines.find(key))
        if found not in problems:  # two entries wrong the same way are one problem
            problems.append(found)

    if not NAME_RE.fullmatch(name):
        problem("", f"profile name {name!r} may hold only letters, digits, '.', '_', '+', '-'")
    keys.check(doc, problem)
    python = text_value(doc, "python")
    requirements = requirement_list(doc, "requirements", problem)
    constraints = requirement_list(doc, "constraints", problem)
    torch = _torch(sub_table(doc, "torch"), problem)
    verify_doc = sub_table(doc, "verify")
    checks = Checks(
        versions=text_map(verify_doc, "versions"),
        imports=strings(verify_doc, "imports"),
        probes=strings(verify_doc, "probes"),
    )
    models = _models(sub_table(doc, "models"))
    matrix = _matrix(doc, python, torch.backend, problem)
    serve = servetable.serve_table(doc, problem)
    if problems:
        raise ProfileError(problems)
    return Profile(
        name=name,
        path=path,
        digest=digest,
        description=text_value(doc, "description"),
        python=python,
        requirements=requirements,
        constraints=constraints,
        exclude_newer=text_value(doc, "exclude_newer"),
        torch=torch,
        checks=checks,
        models=models,
        matrix=matrix,
        serve=serve,
    )


def _torch(torch_doc: Mapping[str, Any], problem: Report) -> Torch:
    backend = text_value(torch_doc, "backend")
    implied = cuda_for_backend(backend)
    cuda = text_value(torch_doc, "cuda") or implied
    if implied and cuda != implied and CUDA.fits(cuda):
        problem("torch.cuda", f"{cuda!r} disagrees with backend {backend!r}")
    return Torch(backend=backend, cuda=cuda)


def _models(models_doc: Mapping[str, Any]) -> Models:
    bounds = sub_table(models_doc, "transformers_bounds")
    return Models(
        vllm=text_value(models_doc, "vllm"),
        transformers=text_value(models_doc, "transformers"),
        model_types=strings(models_doc, "model_types"),
        vllm_model_types=strings(models_doc, "vllm_model_types"),
        architectures=strings(models_doc, "architectures"),
        previously_supported=text_map(models_doc, "previously_supported"),
        out_of_tree=text_map(models_doc, "out_of_tree"),
        transformers_bounds={
            str(arch): Bound.from_dict(str(arch), value)
            for arch, value in bounds.items()
            if isinstance(value, dict)
        },
        source=text_value(models_doc, "source"),
    )


def minor_fits(spec: SpecifierSet, minor: str) -> bool:
    """Whether some release of Python ``minor`` ('3.12') satisfies ``spec``."""
    return Version(f"{minor}.0") in spec or Version(f"{minor}.99") in spec


def _matrix(doc: Mapping[str, Any], python: str, backend: str, problem: Report) -> Matrix:
    matrix_doc = sub_table(doc, "matrix")
    pythons = strings(matrix_doc, "python")
    spec = _safe_spec(python) if python else None
    for version in pythons:
        if spec is not None and MINOR.fits(version) and not minor_fits(spec, version):
            problem("matrix.python", f"Python {version} does not fit python = {python!r}")
    if not pythons and not MINOR.fits(python) and python and "matrix" in doc:
        problem("matrix.python", "list the Python versions to lock (python is a range)")
    platforms = strings(matrix_doc, "platforms")
    backends = strings(matrix_doc, "backends")
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
