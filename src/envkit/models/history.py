"""``envkit history``: an architecture across every published vLLM release.

Each release's registry is read from its wheel (releases.registry, cached per release), so
the answer is vLLM's own, release by release: listed or not, dropped, moved to a plugin, and
the transformers range each release declares. The release that dropped it is the first one
after the newest listing it, whether or not vLLM recorded the drop in
``_PREVIOUSLY_SUPPORTED_MODELS``; vLLM's record ("until X") is shown as its own only where the
registries agree (X is the newest release listing it). The shipped profiles that can load
it are named beside.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from packaging.version import InvalidVersion, Version

from envkit.errors import EnvkitError, WheelError
from envkit.io import interrupts
from envkit.profiles.bounds import Bound
from envkit.profiles.profile import Profile
from envkit.releases import boundstable
from envkit.releases.modeltypes import model_types, serving
from envkit.releases.registry import Scan, Scanner
from envkit.releases.testregistry import bounds_for, transformers_bounds


class Presence(str, Enum):
    LISTED = "listed"  # in the release's model registry
    ABSENT = "absent"  # not there, and the release records nothing of it
    DROPPED = "dropped"  # recorded as previously supported
    PLUGIN = "plugin"  # recorded as moved to a plugin
    UNREADABLE = "unreadable"  # the release's registry could not be read


@dataclass(frozen=True, kw_only=True)
class ReleaseEntry:
    version: str
    presence: Presence
    transformers: str  # the range the release declares ('' when none)
    note: str = ""  # "until 0.9.2" or the plugin, from the release's own record
    bound: Bound | None = None  # the release's test registry's transformers bound for it

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "presence": self.presence.value,
            "transformers": self.transformers or None,
            "note": self.note or None,
            "bound": self.bound.to_dict() if self.bound else None,
        }


@dataclass(frozen=True, kw_only=True)
class History:
    architecture: str
    releases: tuple[ReleaseEntry, ...]  # oldest first
    profiles: tuple[str, ...]  # shipped profiles whose pinned vLLM lists it

    @property
    def listed(self) -> tuple[ReleaseEntry, ...]:
        return tuple(r for r in self.releases if r.presence is Presence.LISTED)

    @property
    def gaps(self) -> tuple[str, ...]:
        """Releases between the first and the newest listing it that do not."""
        listed = self.listed
        if not listed:
            return ()
        first, newest = Version(listed[0].version), Version(listed[-1].version)
        return tuple(
            r.version
            for r in self.releases
            if first < Version(r.version) < newest and r.presence is not Presence.LISTED
        )

    @property
    def dropped_in(self) -> str:
        """The first readable release after the newest one listing it ('' when none)."""
        listed = self.listed
        if not listed:
            return ""
        newest = Version(listed[-1].version)
        return next(
            (
                r.version
                for r in self.releases
                if Version(r.version) > newest and r.presence is not Presence.UNREADABLE
            ),
            "",
        )

    def to_dict(self) -> dict[str, Any]:
        listed = self.listed
        dropped = self.dropped_in
        plugin = next((r for r in reversed(self.releases) if r.presence is Presence.PLUGIN), None)
        return {
            "ok": bool(listed),
            "architecture": self.architecture,
            "first": listed[0].version if listed else None,
            "newest": listed[-1].version if listed else None,
            "gaps": list(self.gaps),
            "dropped_in": dropped or None,
            "plugin": plugin.note if plugin else None,
            "profiles": list(self.profiles),
            "releases": [r.to_dict() for r in self.releases],
        }


def _checked_record(entry: ReleaseEntry, newest: str) -> ReleaseEntry:
    """vLLM's "until X" as it is where the registries agree (X is the newest release listing
    the architecture); where they do not, what each says."""
    if entry.presence is not Presence.DROPPED:
        return entry
    recorded = entry.note.removeprefix("until ")
    if newest and _same(recorded, newest):
        return entry
    seen = f"its registries list it through {newest}" if newest else "no registry lists it"
    return dataclasses.replace(entry, note=f"recorded as until {recorded}, but {seen}")


def _same(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


SCAN_WORKERS = 6  # releases read side by side (each a few range requests of its wheel)


def prefetch(
    scanner: Scanner,
    project: str,
    versions: list[Version],
    bounds: Callable[[Scan], bool] = lambda _scan: False,
) -> None:
    """The scans of ``versions`` read a few at a time (each kept by the scanner for the
    run), so that reading them in order after waits on no network; and as each scan
    arrives, the test registry of each vLLM release it says ``bounds`` of (cached), so
    that the sdists download while the other wheels are scanned. A release whose wheel or
    sdist cannot be read is left to the reading after, which says so."""
    sdists = project == "vllm" and scanner.use_cache  # (read here, kept for the reading after)
    if sdists and any(boundstable.lookup(scanner.index, v) is None for v in versions):
        with contextlib.suppress(EnvkitError):
            scanner.sdists(project)  # listed once, before the threads ask

    def one(version: Version) -> None:
        with contextlib.suppress(EnvkitError):
            if bounds(scanner.scan(project, version)) and sdists:
                transformers_bounds(scanner, version)

    with interrupts.thread_pool(SCAN_WORKERS) as pool:
        list(pool.map(one, versions))


def history(architecture: str, scanner: Scanner, shipped: list[Profile]) -> History:
    """Every published vLLM release's word on ``architecture`` (each scan cached), with the
    transformers bound each listing release's test registry gives it (its sdist, cached)."""
    entries = []
    prefetch(scanner, "vllm", scanner.releases("vllm"), lambda s: architecture in s.architectures)
    for version in scanner.releases("vllm"):
        try:
            scan = scanner.scan("vllm", version)
        except WheelError:
            entries.append(
                ReleaseEntry(version=str(version), presence=Presence.UNREADABLE, transformers="")
            )
            continue
        transformers = scan.requires.get("transformers", "")
        if architecture in scan.architectures:
            presence, note = Presence.LISTED, ""
        elif architecture in scan.out_of_tree:
            presence, note = Presence.PLUGIN, scan.out_of_tree[architecture]
        elif architecture in scan.previously_supported:
            presence = Presence.DROPPED
            note = f"until {scan.previously_supported[architecture]}"
        else:
            presence, note = Presence.ABSENT, ""
        entries.append(
            ReleaseEntry(
                version=str(version), presence=presence, transformers=transformers, note=note
            )
        )
    listed = [Version(e.version) for e in entries if e.presence is Presence.LISTED]
    newest = str(max(listed)) if listed else ""
    entries = [_checked_record(e, newest) for e in entries]
    bounds = bounds_for(scanner, listed)
    entries = [
        dataclasses.replace(e, bound=bounds.get(Version(e.version), {}).get(architecture))
        for e in entries
    ]
    loaders = tuple(p.name for p in shipped if architecture in p.models.architectures)
    return History(architecture=architecture, releases=tuple(entries), profiles=loaders)


@dataclass(frozen=True, kw_only=True)
class TypeHistory:
    """A model type's architectures (releases.modeltypes) and the history of each."""

    model_type: str
    architectures: tuple[str, ...]  # every architecture that serves it, sorted
    transformers: str  # the release whose auto tables were read ('' when none could be)
    histories: tuple[History, ...]  # those some release lists, else every one found
    note: str = ""  # why transformers' tables were left out
    close: tuple[str, ...] = ()  # with no architecture: the model types spelt most like it


def of_model_type(model_type: str, scanner: Scanner, shipped: list[Profile]) -> TypeHistory:
    """The history of every architecture serving ``model_type``: transformers' auto tables
    (its newest release) and vLLM's registry names across every release. Only those some
    release lists are shown, unless none is. Raises NetworkError when vLLM's releases
    cannot be listed; transformers' tables that cannot be read are said in ``note``."""
    tables: dict[str, tuple[str, ...]] = {}
    newest, note = "", ""
    try:  # first: the tables say which releases' sdists to read along with the scans
        releases = scanner.releases("transformers")
        if releases:
            newest = str(releases[-1])
            tables = model_types(scanner, releases[-1])
    except EnvkitError as exc:
        note = f"transformers' auto tables not read: {exc.message}"

    def serves(scan: Scan) -> bool:  # lists an architecture that serving() will name
        return not set(scan.architectures).isdisjoint(
            serving(model_type, tables, scan.architectures)
        )

    names: set[str] = set()
    prefetch(scanner, "vllm", scanner.releases("vllm"), serves)
    for version in scanner.releases("vllm"):
        try:
            names |= set(scanner.scan("vllm", version).architectures)
        except WheelError:
            continue  # shown as unreadable in each history
    archs = serving(model_type, tables, names)
    found = [history(arch, scanner, shipped) for arch in archs]
    listed = tuple(h for h in found if h.listed)
    known = sorted({t for types in tables.values() for t in types})
    return TypeHistory(
        model_type=model_type,
        architectures=archs,
        transformers=newest if tables else "",
        histories=listed or tuple(found),
        note=note,
        close=() if archs else tuple(difflib.get_close_matches(model_type, known, n=3)),
    )
