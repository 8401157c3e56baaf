"""vLLM's per-architecture transformers bounds, read from each release's source distribution.

The bounds live in ``tests/models/registry.py``, which only the source distribution carries
(a ``.tar.gz``: no range reads). It is read as it downloads, within a size cap, until that
file and ``tests/models/test_initialization.py`` (which says which bounds vLLM's own
initialization test applies: bounds.InitPolicy) are out of it; in vLLM's sdists they come
about two thirds of the way in (0.33.0: 69% of its 47 MB, 0.20.0: 78%), and the rest is
never fetched, nor a body held. The parsed bounds are cached per release and index; a
release whose sdist has no test registry (older ones) is cached as such. A network failure
is raised, never cached. For the index envkit's table was read from
(:mod:`envkit.releases.boundstable`, every published release's bounds) no sdist is read.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from packaging.version import Version

from envkit.errors import WheelError
from envkit.index.archives import tar_members
from envkit.index.pages import WheelFile
from envkit.io import interrupts
from envkit.io.cache import BOUNDS, Fields
from envkit.io.http import MiB, status_error
from envkit.io.urls import index_key
from envkit.profiles.bounds import Bound, InitPolicy, parse_policy, parse_registry
from envkit.releases import boundstable
from envkit.releases.registry import Scan, Scanner, with_bounds

REGISTRY = "tests/models/registry.py"
INIT_TEST = "tests/models/test_initialization.py"
MAX_SDIST = 96 * MiB  # vLLM's are 7-10 MB
MAX_REGISTRY = 4 * MiB


def _key(version: Version, index: str) -> str:
    return f"vllm-{version}.{index_key(index)}"


def _entry(f: Fields) -> dict[str, Bound]:
    f.text("source")
    return {arch: Bound.from_entry(arch, b) for arch, b in f.table_map("bounds").items()}


def _cached(version: Version, index: str) -> dict[str, Bound] | None:
    return BOUNDS.load(_key(version, index), _entry)


def _store(version: Version, index: str, found: dict[str, Bound], source: str) -> None:
    data = {"source": source, "bounds": {k: b.to_dict() for k, b in sorted(found.items())}}
    BOUNDS.store(_key(version, index), data)


def transformers_bounds(scanner: Scanner, version: Version) -> dict[str, Bound]:
    """Architecture -> its bound, for the vLLM release ``version`` ({} when the release
    declares none or publishes no sdist with a test registry): from the user's cache, else
    envkit's table when it was read from the scanner's index (boundstable; with
    ``--no-cache`` too, as the kernel table), else the release's sdist (then cached)."""
    if scanner.use_cache:
        cached = _cached(version, scanner.index)
        if cached is not None:
            return cached
    shipped = boundstable.lookup(scanner.index, version)
    if shipped is not None:
        return dict(shipped.bounds)
    sdists = scanner.sdists("vllm")
    sdist = sdists.get(version)
    if sdist is None:
        _store(version, scanner.index, {}, "no source distribution")
        return {}
    found, registry = read_sdist(scanner, version, sdist)
    source = sdist.filename if registry else f"{sdist.filename} has no {REGISTRY}"
    _store(version, scanner.index, found, source)
    return found


def read_sdist(
    scanner: Scanner, version: Version, sdist: WheelFile
) -> tuple[dict[str, Bound], bool]:
    """The bounds vLLM ``version``'s sdist declares, and whether it has a test registry (read
    as it downloads, up to its test files; nothing cached). WheelError for a registry that is
    not Python, NetworkError for a failed download."""
    scanner.progress(f"reading vLLM {version}'s test registry from {sdist.filename}")
    # within what the index says it is (with slack for a mirror's rounding)
    declared = sdist.size or MAX_SDIST
    limit = min(MAX_SDIST, declared + declared // 8 + MiB)
    texts: dict[str, str] = {}

    def read(pieces: Iterator[bytes]) -> None:
        texts.update(_sdist_texts(pieces, sdist.url))

    answer = scanner.http.request("GET", sdist.url, max_bytes=limit, consume=read)
    if answer.status != 200:
        raise status_error(sdist.url, answer.status)
    if REGISTRY not in texts:
        return {}, False
    try:
        policy = parse_policy(texts[INIT_TEST]) if INIT_TEST in texts else InitPolicy()
        return parse_registry(texts[REGISTRY], policy=policy), True
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise WheelError(
            f"{REGISTRY} in {sdist.filename} is not Python envkit can read.",
            "Report it; envkit reads vLLM's test registry without running it.",
        ) from None


def _sdist_texts(body: Iterable[bytes], url: str) -> dict[str, str]:
    """The test registry and the initialization test out of a .tar.gz (those it has), read
    within the caps on members, sizes, inflated bytes and time (index.archives)."""

    def wanted(name: str) -> bool:
        parts = name.split("/", 1)
        return len(parts) == 2 and parts[1] in (REGISTRY, INIT_TEST)

    found = tar_members(body, url, wanted, count=2, max_wanted=MAX_REGISTRY)
    return {name.split("/", 1)[1]: data.decode("utf-8", "replace") for name, data in found.items()}


def bounds_for(
    scanner: Scanner, versions: Iterable[Version], *, workers: int = 4
) -> dict[Version, dict[str, Bound]]:
    """:func:`transformers_bounds` of many releases, a few sdists at a time. A release whose
    sdist cannot be read gets {} here (said through the scanner's progress), never cached."""
    wanted = list(versions)
    if any(boundstable.lookup(scanner.index, v) is None for v in wanted):
        scanner.sdists("vllm")  # listed once, before the threads ask

    def one(version: Version) -> dict[str, Bound]:
        try:
            return transformers_bounds(scanner, version)
        except WheelError as exc:
            scanner.progress(f"vLLM {version}'s test registry left out: {exc.message}")
            return {}

    with interrupts.thread_pool(workers) as pool:
        return dict(zip(wanted, pool.map(one, wanted), strict=True))


def scan_release(scanner: Scanner, project: str, version: Version) -> Scan:
    """What ``envkit scan project==version`` answers: the release's scan, and for vLLM its
    per-architecture transformers bounds from the sdist's test registry."""
    result = scanner.scan(project, version)
    if project == "vllm":
        result = with_bounds(result, transformers_bounds(scanner, version))
    return result
