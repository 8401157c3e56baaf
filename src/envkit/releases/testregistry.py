"""vLLM's per-architecture transformers bounds, read from each release's source distribution.

The bounds live in ``tests/models/registry.py``, which only the source distribution carries
(a ``.tar.gz``: no range reads, so it is downloaded once, within a size cap, and only that
file is read out of it). The parsed bounds are cached per release and index; a release
whose sdist has no test registry (older ones) is cached as such. A network failure is
raised, never cached.
"""

from __future__ import annotations

import io
import json
import tarfile
import zlib
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from packaging.version import Version

from envkit.errors import FileSystemError, WheelError
from envkit.io.atomicfile import write_atomic
from envkit.io.http import MiB, status_error
from envkit.io.redaction import redact
from envkit.profiles.bounds import Bound, parse_registry
from envkit.releases.registry import Scanner, cache_dir, index_key

FORMAT = 1
REGISTRY = "tests/models/registry.py"
MAX_SDIST = 96 * MiB  # vLLM's are 7-10 MB
MAX_REGISTRY = 4 * MiB


def _cache_file(version: Version, index: str) -> Path:
    return cache_dir().parent / "bounds" / f"vllm-{version}.{index_key(index)}.v{FORMAT}.json"


def _cached(version: Version, index: str) -> dict[str, Bound] | None:
    try:
        path = _cache_file(version, index)
        if path.stat().st_size > MAX_REGISTRY:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        return {str(k): Bound.from_dict(str(k), v) for k, v in data["bounds"].items()}
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None


def _store(version: Version, index: str, found: dict[str, Bound], source: str) -> None:
    path = _cache_file(version, index)
    data = {"source": source, "bounds": {k: b.to_dict() for k, b in sorted(found.items())}}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(data, sort_keys=True))
    except (OSError, FileSystemError):
        pass


def transformers_bounds(scanner: Scanner, version: Version) -> dict[str, Bound]:
    """Architecture -> its bound, for the vLLM release ``version`` ({} when the release
    declares none or publishes no sdist with a test registry)."""
    if scanner.use_cache:
        cached = _cached(version, scanner.index)
        if cached is not None:
            return cached
    sdists = scanner.sdists("vllm")
    sdist = sdists.get(version)
    if sdist is None:
        _store(version, scanner.index, {}, "no source distribution")
        return {}
    scanner.progress(f"reading vLLM {version}'s test registry from {sdist.filename}")
    answer = scanner.http.request("GET", sdist.url, max_bytes=MAX_SDIST)
    if answer.status != 200:
        raise status_error(sdist.url, answer.status)
    text = _registry_text(answer.body, sdist.url)
    if text is None:
        _store(version, scanner.index, {}, f"{sdist.filename} has no {REGISTRY}")
        return {}
    try:
        found = parse_registry(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise WheelError(
            f"{REGISTRY} in {sdist.filename} is not Python envkit can read.",
            "Report it; envkit reads vLLM's test registry without running it.",
        ) from None
    _store(version, scanner.index, found, sdist.filename)
    return found


def _registry_text(body: bytes, url: str) -> str | None:
    """The test registry out of a .tar.gz (None when it has none), within the size caps."""
    try:
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as archive:
            for member in archive:
                parts = member.name.split("/", 1)
                if len(parts) == 2 and parts[1] == REGISTRY and member.isfile():
                    if member.size > MAX_REGISTRY:
                        break
                    handle = archive.extractfile(member)
                    return handle.read(MAX_REGISTRY).decode("utf-8", "replace") if handle else None
    except (tarfile.TarError, zlib.error, EOFError, OSError) as exc:
        raise WheelError(
            f"{redact(url)} is not a source archive envkit can read ({exc})."
        ) from None
    return None


def bounds_for(
    scanner: Scanner, versions: Iterable[Version], *, workers: int = 4
) -> dict[Version, dict[str, Bound]]:
    """:func:`transformers_bounds` of many releases, a few sdists at a time. A release whose
    sdist cannot be read gets {} here (said through the scanner's progress), never cached."""
    wanted = list(versions)
    scanner.sdists("vllm")

    def one(version: Version) -> dict[str, Bound]:
        try:
            return transformers_bounds(scanner, version)
        except WheelError as exc:
            scanner.progress(f"vLLM {version}'s test registry left out: {exc.message}")
            return {}

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(zip(wanted, pool.map(one, wanted), strict=True))
