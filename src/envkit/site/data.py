"""What `envkit site` shows, gathered: every vLLM release's registry, vLLM's own transformers
bounds, which model types name each architecture, the shipped profiles with their lock cells
and the NVIDIA driver each needs, and the known-bad pairs `compat` finds.

Everything comes from caches envkit already keeps (scans per release, bounds per sdist,
compat per pair) or is cached here (model types per transformers release), so a second run
reads nothing from the network. Nothing here depends on when it runs: the site is
byte-for-byte the same from the same caches.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from envkit.compat.check.checker import Checker, CompatReport
from envkit.errors import EnvkitError, WheelError
from envkit.gpu.needs import for_profile, profile_summary
from envkit.gpu.published import kerneltable
from envkit.io import interrupts
from envkit.lock.cells import CellState
from envkit.lock.place import cell_folder
from envkit.lock.states import states
from envkit.profiles.bounds import Bound
from envkit.profiles.profile import Profile
from envkit.releases.modeltypes import model_types
from envkit.releases.registry import Scan, Scanner
from envkit.releases.testregistry import bounds_for

_FAMILY = re.compile(r"[a-z]+")


class State:
    """One cell of the matrix: what a release says of an architecture."""

    LISTED = "y"
    ABSENT = "n"
    DROPPED = "d"
    PLUGIN = "p"
    UNREADABLE = "u"


@dataclass(frozen=True)
class Release:
    version: str
    transformers: str  # the range it declares
    uploaded: str  # the day its wheel was published ('' when the index does not say)
    wheel: str
    readable: bool
    kernels: str = ""  # what its core modules' main fatbin containers carry ('' unknown)
    cuda: str = ""  # the CUDA runtime major its modules need ('12'; '' unknown)
    torch: str = ""  # the torch it pins and that build's CUDA and kernels ('' unknown)


@dataclass(frozen=True)
class Row:
    architecture: str
    family: str
    model_types: tuple[str, ...]
    states: str  # one State letter per release, oldest first
    notes: tuple[str, ...]  # per release: the bound, the plugin, "until X" ('' when none)


@dataclass(frozen=True)
class ProfilePage:
    profile: Profile
    cells: tuple[CellState, ...]
    files: tuple[Path, ...]  # published constraints and pylocks
    compat: CompatReport | None
    compat_error: str = ""
    driver: str = ""  # the driver its torch build needs (gpu.needs.profile_summary)
    driver_note: str = ""  # what minor-version compatibility adds ('' when nothing)


@dataclass(frozen=True, kw_only=True)
class SiteData:
    releases: tuple[Release, ...]
    rows: tuple[Row, ...]
    profiles: tuple[ProfilePage, ...]
    known_bad: tuple[CompatReport, ...]
    transformers: str  # the release the model types were read from
    shipped_releases: frozenset[str] = field(default_factory=frozenset)


def gather(
    scanner: Scanner,
    checker: Checker,
    profiles: list[Profile],
    constraints: str | None,
    progress: Callable[[str], None],
) -> SiteData:
    versions = scanner.releases("vllm")
    progress(f"reading {len(versions)} vLLM releases (cached ones from the cache)")
    scans = _scans(scanner, versions)
    progress("reading vLLM's test registries (sdists, cached)")
    bounds = bounds_for(scanner, [v for v in versions if scans[v] is not None])
    newest_tf = scanner.releases("transformers")[-1]
    types = model_types(scanner, newest_tf)
    releases = tuple(_release(scanner, v, scans[v]) for v in versions)
    rows = _rows(versions, scans, bounds, types)
    progress("checking the shipped profiles' pins and their known-bad pairs (compat, cached)")
    pages = tuple(_page(p, constraints, checker) for p in profiles)
    bad = _known_bad(profiles, scans, scanner, checker, progress)
    shipped = frozenset(p.models.vllm for p in profiles if p.models.vllm)
    return SiteData(
        releases=releases,
        rows=rows,
        profiles=pages,
        known_bad=bad,
        transformers=str(newest_tf),
        shipped_releases=shipped,
    )


def _scans(scanner: Scanner, versions: list[Version]) -> dict[Version, Scan | None]:
    scanner.files("vllm")  # the index page once, before the threads

    def one(version: Version) -> Scan | None:
        try:
            return scanner.scan("vllm", version)
        except WheelError:
            return None  # shown as unreadable

    with interrupts.thread_pool(4) as pool:
        return dict(zip(versions, pool.map(one, versions), strict=True))


def _release(scanner: Scanner, version: Version, scan: Scan | None) -> Release:
    uploaded = (scanner.upload_time("vllm", version) or "")[:10]
    table = kerneltable.shipped()
    build = table.vllm_build(str(version))
    torch = table.torch_build(build.torch) if build is not None and build.torch else None
    return Release(
        version=str(version),
        transformers=scan.requires.get("transformers", "") if scan else "",
        uploaded=uploaded,
        wheel=scan.wheel if scan else "",
        readable=scan is not None,
        kernels=build.targets() if build is not None else "",
        cuda=str(build.cuda_major) if build is not None and build.cuda_major else "",
        torch=f"{torch.label}: {torch.targets()}" if torch is not None else "",
    )


def _rows(
    versions: list[Version],
    scans: Mapping[Version, Scan | None],
    bounds: Mapping[Version, Mapping[str, Bound]],
    types: Mapping[str, tuple[str, ...]],
) -> tuple[Row, ...]:
    every: set[str] = set()
    for scan in scans.values():
        if scan is not None:
            every |= set(scan.architectures) | set(scan.previously_supported)
            every |= set(scan.out_of_tree)
    rows = []
    for arch in sorted(every, key=lambda a: (a.lower(), a)):  # total: MPT and Mpt both exist
        letters, notes = [], []
        for version in versions:
            state, note = _cell(arch, scans[version], bounds.get(version, {}))
            letters.append(state)
            notes.append(note)
        names = types.get(arch, ())
        found = _FAMILY.match(names[0]) if names else None
        family = found.group(0) if found else "other"
        rows.append(Row(arch, family, names, "".join(letters), tuple(notes)))
    return tuple(rows)


def _cell(arch: str, scan: Scan | None, bounds: Mapping[str, Bound]) -> tuple[str, str]:
    if scan is None:
        return State.UNREADABLE, ""
    if arch in scan.architectures:
        bound = bounds.get(arch)
        return State.LISTED, (f"vLLM's tests need {bound.describe_tier()}" if bound else "")
    if arch in scan.out_of_tree:
        return State.PLUGIN, f"moved to {scan.out_of_tree[arch]}"
    if arch in scan.previously_supported:
        return State.DROPPED, f"supported until {scan.previously_supported[arch]}"
    return State.ABSENT, ""


def _page(profile: Profile, constraints: str | None, checker: Checker) -> ProfilePage:
    cells = tuple(states(profile, constraints))
    folder = cell_folder(profile, constraints)
    files = tuple(sorted(p for p in folder.glob("*") if p.suffix in (".txt", ".toml")))
    pair = profile.pair()
    report, error = None, ""
    if pair is not None:
        try:
            report = checker.check(Version(pair[0]), Version(pair[1]))
        except EnvkitError as exc:
            error = exc.message
    need = for_profile(profile)
    return ProfilePage(
        profile,
        cells,
        files,
        report,
        error,
        driver=profile_summary(profile),
        driver_note=need.compat_note() if need else "",
    )


def _known_bad(
    profiles: list[Profile],
    scans: Mapping[Version, Scan | None],
    scanner: Scanner,
    checker: Checker,
    progress: Callable[[str], None],
) -> tuple[CompatReport, ...]:
    """Each shipped profile's vLLM with the newest transformers its own range allows: the
    pair a plain `pip install vllm==X` gets today, when compat finds it broken."""
    out = []
    tf_releases = scanner.releases("transformers")
    for vllm in sorted({Version(p.models.vllm) for p in profiles if p.models.vllm}):
        scan = scans.get(vllm)
        if scan is None:
            continue
        try:
            spec = SpecifierSet(scan.requires.get("transformers", ""))
        except InvalidSpecifier:
            continue
        allowed = [v for v in tf_releases if spec.contains(v)]
        if not allowed:
            continue
        try:
            report = checker.check(vllm, allowed[-1])
        except EnvkitError as exc:
            progress(f"compat of vLLM {vllm} + transformers {allowed[-1]} left out: {exc.message}")
            continue
        if not report.compatible:
            out.append(report)
    return tuple(out)
