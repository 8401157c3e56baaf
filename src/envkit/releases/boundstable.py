"""envkit's table of vLLM's test-registry bounds: per published vLLM release, the sdist they
were read from and the per-architecture transformers bounds its ``tests/models/registry.py``
gives (as :mod:`envkit.releases.testregistry` reads and caches them), or that the sdist has
no test registry, or that the index lists no sdist of the release.

A published sdist never changes, so what it says is a fact that ships with envkit, as the GPU
kernel table does (``data/gpu-kernels.json``): reading the sdists themselves costs about a
gigabyte of downloads and ten seconds of inflating for ``history`` over every release. The
table names the index it was read from (:func:`envkit.io.urls.index_key`) and
answers only for that index; for another one it is not used. It is read once, when a lookup
first needs it, and checked whole where it enters (size, JSON, every field's type and shape,
every version): a damaged table is an error naming the file, never a wrong answer.
Regenerate it (incremental: a release whose sdist is in the table is not read again) with::

    python -m envkit.releases.boundsupdate --out src/envkit/data/transformers-bounds.json
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from packaging.version import InvalidVersion, Version

from envkit.errors import UnreadableFile
from envkit.io.cache import BadEntry, Fields
from envkit.io.files import MiB
from envkit.io.urls import index_key
from envkit.profiles.bounds import Bound

FILE = "transformers-bounds.json"
MAX_TABLE = 16 * MiB
MAX_RELEASES = 5000
NO_REGISTRY = "no test registry"
REINSTALL = "Reinstall envkit: the table ships with it and nothing changes it after."
NO_SDIST = "no source distribution"  # the index lists a wheel of the release, no sdist
ABOUT = (
    "vLLM's per-architecture transformers bounds, per published vLLM release, as its source "
    "distribution's tests/models/registry.py declares them (with the directions its "
    "tests/models/test_initialization.py applies), or that the sdist has none; read from the "
    "sdists as they download, never run. Regenerate: python -m envkit.releases.boundsupdate "
    "--out src/envkit/data/transformers-bounds.json"
)


@dataclass(frozen=True)
class Release:
    """One vLLM release's bounds, and the sdist they were read from."""

    version: str
    sdist: str  # its file name; '' when the index lists none for the release
    registry: bool  # False: the sdist has no test registry (and so no bounds), or no sdist
    bounds: Mapping[str, Bound] = field(default_factory=dict)

    def to_entry(self) -> dict[str, Any]:
        bounds: Any = {a: b.to_dict() for a, b in sorted(self.bounds.items())}
        said = NO_REGISTRY if self.sdist else NO_SDIST
        return {
            "version": self.version,
            "sdist": self.sdist,
            "bounds": bounds if self.registry else said,
        }


@dataclass(frozen=True)
class BoundsTable:
    about: str
    generated: str
    source: str
    index: str  # index_key of the index the sdists were read from
    releases: Mapping[Version, Release]

    def release(self, index: str, version: Version) -> Release | None:
        """vLLM ``version``'s entry when the table was read from ``index``; else None."""
        return self.releases.get(version) if index_key(index) == self.index else None


def dumps(table: BoundsTable) -> str:
    """The table as JSON, one line per release (a regeneration diffs by release)."""
    lines = ["{"]
    for key in ("about", "generated", "source", "index"):
        lines.append(f" {json.dumps(key)}: {json.dumps(getattr(table, key))},")
    lines.append(' "releases": [')
    rows = [
        f"  {json.dumps(r.to_entry(), sort_keys=False)}" for _v, r in sorted(table.releases.items())
    ]
    lines.append(",\n".join(rows))
    lines.append(" ]")
    return "\n".join(line for line in lines if line) + "\n}\n"


def load(text: str, where: str = FILE) -> BoundsTable:
    """The table in ``text``, checked whole; BadEntry naming what is wrong."""
    if len(text) > MAX_TABLE:
        raise BadEntry(f"{where} is larger than {MAX_TABLE:,} characters")

    def no_constant(name: str) -> Any:
        raise BadEntry(f"{name} is not JSON")

    try:
        doc = Fields(json.loads(text, parse_constant=no_constant), where)
        entries = doc.tables("releases")
        if len(entries) > MAX_RELEASES:
            raise BadEntry(f"{where} holds more than {MAX_RELEASES:,} releases")
        releases: dict[Version, Release] = {}
        for entry in entries:
            release = _release(entry)
            version = Version(release.version)
            if version in releases or str(version) != release.version:
                raise BadEntry(f"{where}: vLLM {release.version} is out of place")
            releases[version] = release
        table = BoundsTable(
            about=doc.text("about"),
            generated=doc.text("generated"),
            source=doc.text("source"),
            index=doc.text("index"),
            releases=releases,
        )
    except (ValueError, RecursionError, TypeError, KeyError) as exc:  # InvalidVersion, JSON
        raise BadEntry(f"{where} is not a bounds table ({exc})") from None
    if len(table.index) != 12 or any(c not in "0123456789abcdef" for c in table.index):
        raise BadEntry(f"{where}: its index {table.index!r} is not an index key")
    return table


def _release(entry: Fields) -> Release:
    version, sdist = entry.text("version"), entry.text("sdist")
    Version(version)  # InvalidVersion refuses the table
    raw = entry.data.get("bounds")
    if raw == NO_SDIST and not sdist:
        return Release(version, "", False)
    if not sdist.endswith((".tar.gz", ".zip")) or "/" in sdist:
        raise BadEntry(f"{entry.where}: {sdist!r} is not an sdist's file name")
    if raw == NO_REGISTRY:
        return Release(version, sdist, False)
    bounds = {
        a: Bound.from_entry(a, f) for a, f in entry.table_map("bounds", optional=False).items()
    }
    return Release(version, sdist, True, bounds)


_lock = threading.Lock()
_loaded: dict[str, BoundsTable | None] = {}


def shipped_path() -> str:
    """Where envkit's own table is."""
    return str(resources.files("envkit") / "data" / FILE)


def shipped() -> BoundsTable | None:
    """envkit's own table, read and checked on the first call (None when envkit ships none).
    UnreadableFile, naming the file, when it is damaged."""
    path = shipped_path()
    with _lock:  # the history threads ask at once: read once
        if path not in _loaded:
            _loaded[path] = _read(path)
        return _loaded[path]


def _read(path: str) -> BoundsTable | None:
    from envkit.io.files import read_small_text

    try:
        text = read_small_text(path, MAX_TABLE, what="bounds table")
    except UnreadableFile as exc:
        if exc.kind == "missing":
            return None
        exc.hint = REINSTALL
        raise
    try:
        return load(text)
    except (BadEntry, InvalidVersion) as exc:
        damaged = UnreadableFile(path, f"is damaged: {exc}", "unreadable", what="bounds table")
        damaged.hint = REINSTALL
        raise damaged from None


def lookup(index: str, version: Version) -> Release | None:
    """vLLM ``version``'s bounds from envkit's table, when it holds them for ``index``."""
    table = shipped()
    return table.release(index, version) if table is not None else None
