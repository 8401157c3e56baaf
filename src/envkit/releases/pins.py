"""The releases a wheel pins exactly, and whether the index lists them: a vLLM release
that pins one the index lacks cannot be installed from it (vLLM 0.34.0 pinned
flashinfer-python 0.7.3, which was never published: its draft's lock was unresolvable)."""

from __future__ import annotations

from collections.abc import Mapping

from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envkit.errors import NetworkError, WheelError
from envkit.index.metadata import parse as parse_metadata
from envkit.index.session import IndexSession
from envkit.releases.registry import Scanner, dependencies

# their builds may come from the PyTorch index: the CUDA tests judge their pins, not this
TORCH_FAMILY = frozenset({"torch", "torchvision", "torchaudio"})


def exact_pins(metadata: str, environment: Mapping[str, str]) -> dict[str, str]:
    """The releases a wheel's METADATA pins exactly (``name==X``, no wildcard) where its
    markers hold for ``environment`` (:func:`marker_environment`), extras left out:
    name -> version."""
    if not metadata:
        return {}
    out: dict[str, str] = {}
    for req in dependencies(parse_metadata(metadata).requires_dist):
        if req.marker is not None:
            try:
                if not req.marker.evaluate(dict(environment)):
                    continue
            except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
                continue
        specs = list(req.specifier)
        if len(specs) == 1 and specs[0].operator == "==" and "*" not in specs[0].version:
            out[canonicalize_name(req.name)] = specs[0].version
    return out


def marker_environment(python: str, platform: str) -> dict[str, str]:
    """The PEP 508 marker values of CPython ``python`` (``3.12``) on ``platform``
    (``linux-x86_64``, ``linux-aarch64``): what a requirement's markers are judged in."""
    machine = platform.rpartition("-")[2]
    return {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "platform_system": "Linux",
        "sys_platform": "linux",
        "os_name": "posix",
        "platform_machine": machine,
    }


def refusal(scanner: Scanner, version: Version, python: str, platform: str) -> str:
    """Why vLLM ``version`` cannot be installed from the scanner's index: the releases its
    wheel pins on ``python`` and ``platform`` that the index does not list; '' when it lists
    them all. A knowledge snapshot holds no page of these projects: it gives no verdict."""
    if scanner.snapshot is not None:
        return ""
    try:
        metadata = scanner.metadata("vllm", version)
    except WheelError:
        return "its wheel's METADATA cannot be read"
    missing = unlisted(scanner, exact_pins(metadata, marker_environment(python, platform)))
    return f"pins {', '.join(missing)}, which the index does not list" if missing else ""


def unlisted(session: IndexSession, pins: Mapping[str, str]) -> list[str]:
    """``name==X`` of each pin (torch's family left out) of which the session's index lists
    no wheel and no sdist (yanked ones are not listed); a pin that is no version gives no
    verdict. Raises NetworkError for a page that could not be read (never a verdict), but
    not for a project the index answers it does not have (HTTP 404)."""
    missing: list[str] = []
    for name, pinned in sorted(pins.items()):
        try:
            wanted = Version(pinned)
        except InvalidVersion:
            continue
        if name not in TORCH_FAMILY and not _listed(session, name, wanted):
            missing.append(f"{name}=={pinned}")
    return missing


def _listed(session: IndexSession, project: str, wanted: Version) -> bool:
    try:
        wheels = session.files(project)
    except NetworkError as exc:
        if exc.status == 404:  # the index has no such project: an answer, not a failure
            return False
        raise
    return any(f.version == wanted for f in wheels) or wanted in session.sdists(project)
