"""vLLM's per-architecture transformers bounds, read from each release's source distribution.

The bounds live in ``tests/models/registry.py``, which only the source distribution carries
(a ``.tar.gz``: no range reads, so it is downloaded once, within a size cap, and only that
file and ``tests/models/test_initialization.py``, which says which bounds vLLM's own
initialization test applies (bounds.InitPolicy), are read out of it). The parsed bounds
are cached per release and index; a release whose sdist has no test registry (older ones)
is cached as such. A network failure is
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
from envkit.index.wheels import list_sdists
from envkit.io.atomicfile import write_atomic
from envkit.io.http import MiB, status_error
from envkit.io.redaction import redact
from envkit.profiles.bounds import Bound, InitPolicy, parse_policy, parse_registry
from envkit.releases.registry import Scanner, cache_dir, index_key

FORMAT = 2  # 2: each bound says which directions only the reference runner's tests apply
REGISTRY = "tests/models/registry.py"
INIT_TEST = "tests/models/test_initialization.py"
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
    sdists = scanner.memo("vllm-sdists", lambda: list_sdists("vllm", scanner.index, scanner.http))
    sdist = sdists.get(version)
    if sdist is None:
        _store(version, scanner.index, {}, "no source distribution")
        return {}
    scanner.progress(f"reading vLLM {version}'s test registry from {sdist.filename}")
    answer = scanner.http.request("GET", sdist.url, max_bytes=MAX_SDIST)
    if answer.status != 200:
        raise status_error(sdist.url, answer.status)
    texts = _sdist_texts(answer.body, sdist.url)
    if REGISTRY not in texts:
        _store(version, scanner.index, {}, f"{sdist.filename} has no {REGISTRY}")
        return {}
    try:
        policy = parse_policy(texts[INIT_TEST]) if INIT_TEST in texts else InitPolicy()
        found = parse_registry(texts[REGISTRY], policy=policy)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise WheelError(
            f"{REGISTRY} in {sdist.filename} is not Python envkit can read.",
            "Report it; envkit reads vLLM's test registry without running it.",
        ) from None
    _store(version, scanner.index, found, sdist.filename)
    return found


def _sdist_texts(body: bytes, url: str) -> dict[str, str]:
    """The test registry and the initialization test out of a .tar.gz (those it has),
    within the size caps."""
    found: dict[str, str] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(body), mode="r:gz") as archive:
            for member in archive:
                parts = member.name.split("/", 1)
                if len(parts) != 2 or parts[1] not in (REGISTRY, INIT_TEST):
                    continue
                if member.isfile() and member.size <= MAX_REGISTRY:
                    handle = archive.extractfile(member)
                    if handle is not None:
                        found[parts[1]] = handle.read(MAX_REGISTRY).decode("utf-8", "replace")
                if len(found) == 2:
                    break
    except (tarfile.TarError, zlib.error, EOFError, OSError) as exc:
        raise WheelError(
            f"{redact(url)} is not a source archive envkit can read ({exc})."
        ) from None
    return found


def bounds_for(
    scanner: Scanner, versions: Iterable[Version], *, workers: int = 4
) -> dict[Version, dict[str, Bound]]:
    """:func:`transformers_bounds` of many releases, a few sdists at a time. A release whose
    sdist cannot be read gets {} here (said through the scanner's progress), never cached."""
    wanted = list(versions)
    scanner.memo("vllm-sdists", lambda: list_sdists("vllm", scanner.index, scanner.http))

    def one(version: Version) -> dict[str, Bound]:
        try:
            return transformers_bounds(scanner, version)
        except WheelError as exc:
            scanner.progress(f"vLLM {version}'s test registry left out: {exc.message}")
            return {}

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(zip(wanted, pool.map(one, wanted), strict=True))
