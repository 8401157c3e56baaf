"""The GPU layer's answers about a site-packages, kept between runs in envkit's cache
(``gpu-files``, one entry per site-packages) so that a second look reads only what changed.

What is kept, per file: the links it declares (NEEDED, SONAME;
:func:`envkit.gpu.binaries.elf.links`) and its kernels grouped by target
(:func:`envkit.gpu.binaries.images.of_file`), each under the file's stamp (device, inode,
size, modification and change times; :mod:`envkit.gpu.binaries.filecache` says why that
identifies it); and the linkage against
torch (:func:`envkit.gpu.installed.linkage.site_linkage`) under the stamps of every module
and torch library it rests on and of ``torch/version.py``. An answer is used only when
every stamp it rests on is the same, and only by the same reading code: the entry names
envkit's version and the size and time of each module that reads the files, so an envkit
changed in any of them reads everything again.

The entry is input like any other cache entry (:mod:`envkit.io.cache`): read within its cap
and field by field; one that does not hold together is deleted and everything is read
again. Nothing in it is ever a verdict by itself: the findings are made from the answers
each run, for the GPU asked about.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envkit import __version__
from envkit.gpu.binaries import elf, fatbin, images
from envkit.gpu.binaries.filecache import Codec, FileCache, Known, Stamp, reader_id, stamp
from envkit.gpu.binaries.images import Images, from_groups, group_entry, groups_from_entry
from envkit.gpu.installed import linkage, modules
from envkit.gpu.installed.linkage import PackageLinkage, SiteLinkage
from envkit.io.cache import GPU_FILES, BadEntry, Fields, discard

FORMAT = 1  # of what an entry holds, beside GPU_FILES' own format
MAX_FILES = 20_000  # files of one site-packages kept (a vLLM venv: about 420)
MAX_PACKAGES = 1_000  # packages in a linkage
# the modules whose code decides the answers kept: any of them changed, everything is read
READERS = (
    "envkit.gpu.binaries.elf",
    "envkit.gpu.binaries.elfheader",
    "envkit.gpu.binaries.dynsym",
    "envkit.gpu.binaries.fatbin",
    "envkit.gpu.binaries.images",
    "envkit.gpu.binaries.filecache",
    "envkit.gpu.binaries.torchabi",
    "envkit.gpu.installed.modules",
    "envkit.gpu.installed.linkage",
    "envkit.gpu.installed.remembered",
)


def _links_entry(value: elf.Links | elf.Unreadable) -> dict[str, Any]:
    if isinstance(value, elf.Unreadable):
        return {"unreadable": value.reason}
    return {"needed": list(value.needed), "soname": value.soname}


def _links_from(f: Fields) -> elf.Links | elf.Unreadable:
    if "unreadable" in f.data:
        return elf.Unreadable(f.text("unreadable"))
    needed = f.texts("needed")
    if len(needed) > elf.MAX_NEEDED:
        raise BadEntry(f"{f.where}.needed lists more than {elf.MAX_NEEDED} libraries")
    return elf.Links(needed, f.text("soname", ""))


def _kernels_entry(value: Images | fatbin.Damaged | None) -> dict[str, Any]:
    if value is None:
        return {"none": True}
    if isinstance(value, fatbin.Damaged):
        return {"damaged": value.reason, "offset": value.offset}
    return {
        "entries": value.entries,
        "groups": [group_entry(targets, count) for targets, count in value.groups],
    }


def _kernels_from(f: Fields) -> Images | fatbin.Damaged | None:
    if f.flag("none", False):
        return None
    if "damaged" in f.data:
        return fatbin.Damaged(f.text("damaged"), f.whole("offset", 0))
    groups = groups_from_entry(f)
    if not groups:
        raise BadEntry(f"{f.where}.groups is empty (a file without kernels is kept as none)")
    return from_groups(groups, f.whole("entries", high=fatbin.MAX_ENTRIES))


LINKS: Codec[elf.Links | elf.Unreadable] = Codec("links", _links_entry, _links_from)
KERNELS: Codec[Images | fatbin.Damaged | None] = Codec("kernels", _kernels_entry, _kernels_from)
CODECS: dict[str, Codec[Any]] = {reader_id(elf.links): LINKS, reader_id(images.of_file): KERNELS}


def _linkage_entry(found: SiteLinkage | None) -> dict[str, Any]:
    if found is None:
        return {"none": True}
    return {
        "libraries": list(found.libraries),
        "truncated": found.truncated,
        "packages": [
            {
                "package": p.package,
                "modules": list(p.modules),
                "symbols": p.symbols,
                "missing": [list(x) for x in p.missing],
                "unreadable": [list(x) for x in p.unreadable],
                "other_torch": [list(x) for x in p.other_torch],
            }
            for p in found.packages
        ],
    }


def _linkage_from(f: Fields) -> SiteLinkage | None:
    if f.flag("none", False):
        return None
    packages = f.tables("packages")
    if len(packages) > MAX_PACKAGES:
        raise BadEntry(f"{f.where}.packages holds more than {MAX_PACKAGES}")
    return SiteLinkage(
        libraries=f.texts("libraries"),
        packages=tuple(
            PackageLinkage(
                package=p.text("package"),
                modules=p.texts("modules"),
                symbols=p.whole("symbols"),
                missing=p.pairs("missing"),
                unreadable=p.pairs("unreadable"),
                other_torch=p.pairs("other_torch"),
            )
            for p in packages
        ),
        truncated=f.text("truncated", ""),
    )


@dataclass(frozen=True)
class Remembered:
    """An earlier run's entry for one site-packages, made by this same reading code."""

    files: dict[str, Known]
    linkage_inputs: str  # the digest of what the linkage rests on ('' without one)
    linkage: Fields | None


@functools.cache
def code() -> str:
    """What identifies the reading code: envkit's version, this entry's format, and the
    size and modification time of each module in :data:`READERS`."""
    parts: list[object] = [__version__, FORMAT]
    for name in READERS:
        spec = importlib.util.find_spec(name)  # its file, without importing it (pyelftools)
        where = (spec.origin if spec is not None else None) or ""
        found = stamp(where) if where else None
        parts.append([name, found[2:4] if found else None])
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def _key(site_packages: Path) -> str:
    return hashlib.sha256(os.path.realpath(site_packages).encode("utf-8", "replace")).hexdigest()


def _stamp_from(f: Fields) -> Stamp:
    found = f.wholes("stamp")
    if len(found) != 5:
        raise BadEntry(f"{f.where}.stamp is not five numbers")
    return found[0], found[1], found[2], found[3], found[4]


def _parse(f: Fields) -> Remembered:
    if f.text("code") != code():
        raise BadEntry("made by other reading code")
    files = f.table_map("files")
    if len(files) > MAX_FILES:
        raise BadEntry(f"{f.where}.files holds more than {MAX_FILES}")
    known = {}
    for path, record in files.items():
        if not _relative(path):
            raise BadEntry(f"{f.where}.files names {path[:80]!r}, not a path inside site-packages")
        answers = {c.name: record.table(c.name) for c in CODECS.values() if c.name in record.data}
        known[path] = Known(_stamp_from(record), answers)
    linkage = f.table("linkage") if "linkage" in f.data else None
    return Remembered(known, linkage.text("inputs") if linkage else "", linkage)


def load(site_packages: Path) -> Remembered | None:
    """The entry an earlier run kept for ``site_packages``; None when there is none, or one
    made by other reading code or not holding together (it is then read anew)."""
    return GPU_FILES.load(_key(site_packages), _parse)


def file_cache(site_packages: Path, known: Remembered | None) -> FileCache:
    """A FileCache for one look at ``site_packages``, answering from ``known`` while a file
    is the same one (the entry names files by their path inside site-packages, so that it
    holds for a venv moved whole: ``envkit build`` swaps a verified one into place)."""
    base = str(site_packages)
    files = {os.path.join(base, path): k for path, k in known.files.items()} if known else None
    return FileCache(CODECS, files)


def _relative(path: str) -> bool:
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and ".." not in parts and "" not in parts


def _inside(site_packages: Path, path: str) -> str:
    """``path`` as the entry names it (inside site-packages, with '/'), or '' outside it."""
    base = str(site_packages).rstrip(os.sep) + os.sep
    return path[len(base) :].replace(os.sep, "/") if path.startswith(base) else ""


def linkage_inputs(site_packages: Path, walk: modules.Walk, cache: FileCache) -> str:
    """The digest of what the linkage rests on: every compiled module's path, stamp and
    package (a top-level module's is its RECORD's, read this run), torch's libraries' paths
    and stamps, and ``torch/version.py``'s; '' when one of them is too new to keep an answer
    for (:data:`~envkit.gpu.binaries.filecache.SETTLED_NS`) or cannot be looked at."""
    torch = site_packages / "torch"
    paths = [(str(m.path), m.package) for m in walk.modules]
    lib = torch / "lib"
    if lib.is_dir():
        paths += sorted((str(p), "torch") for p in lib.glob("*.so*"))
    paths.append((str(torch / "version.py"), "torch"))
    parts: list[object] = [walk.truncated]
    for path, package in paths:
        found = stamp(path)
        if found is None or not cache.settled(found):
            return ""
        parts.append([_inside(site_packages, path) or path, package, found])
    return hashlib.sha256(json.dumps(parts).encode("utf-8", "replace")).hexdigest()


def site_linkage(
    site_packages: Path, walk: modules.Walk, cache: FileCache, known: Remembered | None
) -> tuple[SiteLinkage | None, str, bool]:
    """(the linkage, the digest of what it rests on, whether it was read now): the one kept
    when every stamp it rests on is the same, else :func:`linkage.site_linkage`'s."""
    inputs = linkage_inputs(site_packages, walk, cache)
    same = known is not None and bool(inputs) and inputs == known.linkage_inputs
    if known is not None and known.linkage is not None and same:
        try:
            return _linkage_from(known.linkage.table("value")), inputs, False
        except BadEntry:
            pass  # read again below; the entry written next holds a good one
    return linkage.site_linkage(site_packages, cache, walk), inputs, True


def save(
    site_packages: Path,
    cache: FileCache,
    known: Remembered | None,
    inputs: str,
    linkage: SiteLinkage | None,
    *,
    linkage_read: bool,
) -> None:
    """Keep this look's answers for the next: only when something was read that the entry
    does not hold (a warm look writes nothing)."""
    if not cache.learned and not inputs:
        return  # nothing settled enough to keep (a venv just made): no entry at all
    learned = {_inside(site_packages, path) for path in cache.learned}
    same_files = known is not None and set(known.files) == learned
    if known is not None and not cache.new and same_files and not (linkage_read and inputs):
        return
    data: dict[str, Any] = {
        "code": code(),
        "files": {
            inside: {"stamp": list(found), **answers}
            for path, (found, answers) in sorted(cache.learned.items())
            if (inside := _inside(site_packages, path))
        },
    }
    if inputs:
        data["linkage"] = {"inputs": inputs, "value": _linkage_entry(linkage)}
    GPU_FILES.store(_key(site_packages), data)


def moved(before: Path, after: Path) -> None:
    """The entry kept for the site-packages at ``before`` now for the one at ``after``: the
    same venv moved whole (its files keep their inodes and times, which every answer is
    checked against when it is used). Nothing when there is none."""
    entry = GPU_FILES.load(_key(before), lambda f: f.data)
    if entry is not None:
        GPU_FILES.store(_key(after), entry)
        discard(GPU_FILES.path(_key(before)))  # envkit's own entry, by its own key
