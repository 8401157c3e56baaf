"""``envkit knowledge export``: fill what the commands read from the index for some
profiles, then write it as one snapshot (:mod:`envkit.index.snapshot`).

For each profile's pinned vLLM and transformers it reads (or finds in the cache) what
check-model, compat and lint answer from: both releases' registries (scans), vLLM's
test-registry bounds, the pair's compat report, transformers' model types, the flags
``vllm serve`` of that release accepts, and the index's file lists of vllm, transformers and
torch. ``history`` adds every vLLM release's registry (history, and check-model's "first
and newest release listing it" for a model no profile loads). The cache entries the fill
read or wrote, and the lists it read, are what the snapshot holds: nothing else of the cache.
A step the index does not answer is "missing" and leaves its knowledge out (a later command
needing it says so; the export ends with exit 2); what a release itself does not hold (a
wheel with no registry) is a note, as the same command online would find. Neither stops
the other steps.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from envkit.compat.check.checker import Checker
from envkit.errors import EnvkitError, NetworkError
from envkit.index import snapshot
from envkit.io import cache
from envkit.profiles.profile import Profile
from envkit.releases.modeltypes import model_types
from envkit.releases.serveflags import FlagReader
from envkit.releases.testregistry import transformers_bounds

PROJECTS = ("vllm", "transformers", "torch")


@dataclass(frozen=True)
class Exported:
    """A snapshot written: it (read back and verified), what it was filled for, what of it
    this run read from the index (the rest came from the cache), and what it lacks."""

    snapshot: snapshot.Snapshot
    profiles: tuple[str, ...]
    kinds: tuple[tuple[str, int], ...]  # cache kind -> entries held
    bytes: int
    missing: tuple[str, ...]  # what the index did not give: a command needing it says so
    notes: tuple[str, ...]  # what a release does not hold: online, the same answer

    @property
    def complete(self) -> bool:
        return not self.missing

    def to_dict(self) -> dict[str, Any]:
        return {
            "snapshot": self.snapshot.to_dict(),
            "profiles": list(self.profiles),
            "kinds": dict(self.kinds),
            "bytes": self.bytes,
            "complete": self.complete,
            "missing": list(self.missing),
            "notes": list(self.notes),
        }


class _Fill:
    def __init__(self, checker: Checker, progress: Callable[[str], None]) -> None:
        self.checker, self.progress = checker, progress
        self.missing: list[str] = []  # not read: the index did not answer
        self.notes: list[str] = []  # read, and the release does not hold it
        self.flags = FlagReader(checker)

    def step(self, what: str, work: Callable[[], object]) -> None:
        self.progress(f"knowledge: {what}")
        try:
            work()
        except NetworkError as exc:
            self.missing.append(f"{what}: not in the snapshot ({exc.message})")
        except EnvkitError as exc:  # the release itself: online, the same answer
            self.notes.append(f"{what}: the release does not hold it ({exc.message})")

    def profile(self, profile: Profile) -> None:
        pins = profile.expected_versions()
        try:
            vllm = Version(pins["vllm"]) if "vllm" in pins else None
            transformers = Version(pins["transformers"]) if "transformers" in pins else None
        except InvalidVersion as exc:
            self.notes.append(f"{profile.name}: its pins are not versions ({exc})")
            return
        c = self.checker
        if vllm is not None:
            self.step(f"vllm {vllm}'s registry", lambda: c.scan("vllm", vllm))
            self.step(f"vllm {vllm}'s test-registry bounds", lambda: transformers_bounds(c, vllm))
            self.step(f"vllm {vllm}'s serve flags", lambda: self.flags.flags(vllm))
        if transformers is not None:
            self.step(
                f"transformers {transformers}'s registry",
                lambda: c.scan("transformers", transformers),
            )
            self.step(
                f"transformers {transformers}'s model types", lambda: model_types(c, transformers)
            )
        if vllm is not None and transformers is not None:
            self.step(
                f"compat vllm {vllm} x transformers {transformers}",
                lambda: c.check(vllm, transformers),
            )

    def history(self) -> None:
        releases: list[Version] = []
        self.step("vllm's releases", lambda: releases.extend(self.checker.releases("vllm")))
        for version in releases:
            self.step(f"vllm {version}'s registry", functools.partial(self._scan, version))

    def _scan(self, version: Version) -> object:
        return self.checker.scan("vllm", version)


def _list(checker: Checker, project: str) -> None:
    """The project's file list; nothing when the index publishes no such project (HTTP 404:
    a command asking for it then says the snapshot lacks it)."""
    try:
        checker.files(project)
    except NetworkError as exc:
        if exc.status != 404:
            raise


def export(
    path: Path,
    profiles: Sequence[Profile],
    index: str,
    *,
    history: bool = False,
    also: Callable[[Checker, Profile], object] | None = None,
    progress: Callable[[str], None] = lambda _m: None,
) -> Exported:
    """Fill what ``profiles`` need from ``index`` (the cache first), then write the snapshot
    to ``path`` atomically; the snapshot in use, if any, answers first (an export of an
    export holds the same). ``also`` is run for each profile with the same checker while
    what is read is recorded (``envkit upgrade``'s search, which sits above this package)."""
    checker = Checker(index, progress=progress)
    fill = _Fill(checker, progress)
    cache.record_touched(True)
    try:
        for project in PROJECTS:
            fill.step(
                f"the index's list of {project}'s files", functools.partial(_list, checker, project)
            )
        for profile in profiles:
            fill.profile(profile)
            if also is not None:
                fill.step(
                    f"{profile.name}'s upgrade search", functools.partial(also, checker, profile)
                )
        if history:
            fill.history()
        entries = {n: t for n in sorted(cache.touched()) if (t := cache.entry_text(n)) is not None}
    finally:
        cache.record_touched(False)
    listings = checker.listings()
    written = snapshot.write(
        path,
        index=checker.index,
        made_for=[p.name for p in profiles],
        pages=listings,
        entries=entries,
    )
    kinds = Counter(name.partition("/")[0] for name in entries)
    return Exported(
        written,
        tuple(p.name for p in profiles),
        tuple(sorted(kinds.items())),
        path.stat().st_size,
        tuple(fill.missing),
        tuple(fill.notes),
    )
