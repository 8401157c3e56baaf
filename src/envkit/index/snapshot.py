"""Knowledge snapshots: everything envkit read from an index, in one file, for a machine
with no network (``envkit knowledge export FILE``, then ``envkit --knowledge FILE ...``).

A snapshot is a zip holding ``manifest.json`` (format, when it was made, by which envkit,
from which index, and every other member with its sha256 and size), ``manifest.sha256``
(the digest of the manifest's bytes), the index's file lists of each project read
(``pages/<project>.json``) and envkit's cache entries (``cache/<kind>/<entry>.json``, as
:mod:`envkit.io.cache` names them). It is input like any other: read within caps of size,
members and inflated bytes (the zip's directory checked from its end record by
:mod:`envkit.index.archives` before ``zipfile`` parses it), every member's name one of those
shapes (never a path that leaves the snapshot), the format and the digest checked, then each
member's sha256. Any failure is :class:`~envkit.errors.BadSnapshot` (exit 2): a snapshot is
used whole or not at all. The digests prove a snapshot unchanged since it was written, not
who wrote it: take snapshots from where you take envkit.

While one is in use (:func:`use`), every :class:`~envkit.index.session.IndexSession` lists
files from it and its index is the snapshot's, the cache answers from it first, a model id
is read from the Hub's local cache alone (as with ``HF_HUB_OFFLINE=1``), and the
session's client is :class:`NoNetwork`: whatever else a command would fetch is
:class:`~envkit.errors.KnowledgeMissing` (exit 2), naming what is missing and how to make a
snapshot that holds it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import re
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import unquote, urlsplit

from packaging.version import InvalidVersion, Version

from envkit import __version__
from envkit.errors import BadInput, BadSnapshot, KnowledgeMissing, UnreadableFile, WheelError
from envkit.index.archives import count_entries, zip_directory
from envkit.index.pages import WheelFile
from envkit.io import cache, hub
from envkit.io.atomicfile import write_atomic
from envkit.io.cache import BadEntry, Fields, is_sha256
from envkit.io.files import MiB, read_small
from envkit.io.http import Http, Response
from envkit.io.redaction import redact
from envkit.io.urls import parse_url
from envkit.wording import counted

FORMAT = 1
KIND = "envkit-knowledge"
MAX_SNAPSHOT = 512 * MiB  # every profile's knowledge is a few MB
MAX_MEMBERS = 50_000  # a cache entry each: scans, bounds, reports, flags, kernels
MAX_MEMBER = 16 * MiB  # the largest kind of cache entry (scans)
MAX_INFLATED = 1024 * MiB  # every member together, once inflated
MANIFEST, DIGEST = "manifest.json", "manifest.sha256"
_PAGE = re.compile(r"pages/([a-z0-9][a-z0-9._-]{0,99})\.json")


@dataclass(frozen=True)
class Listing:
    """One project's files on the index, as the session read them."""

    wheels: tuple[WheelFile, ...]
    sdists: tuple[WheelFile, ...]


@dataclass(frozen=True)
class Snapshot:
    """A snapshot read and verified: where it is, what it says of itself, what it holds."""

    path: str
    created: dt.datetime  # UTC
    envkit: str
    index: str  # without credentials
    made_for: tuple[str, ...]  # the profiles it was filled for ("--all": every one)
    digest: str
    pages: Mapping[str, Listing] = field(repr=False)
    entries: Mapping[str, str] = field(repr=False)  # cache entry name -> its text

    def listing(self, project: str) -> Listing:
        found = self.pages.get(project)
        if found is None:
            missing(self, f"the index's list of {project}'s files")
        return found

    def age(self, now: dt.datetime | None = None) -> str:
        """'knowledge from 2026-11-30, 2 days old'."""
        return age_line(self.created, now)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "created": self.created.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "age_days": age_days(self.created),
            "envkit": self.envkit,
            "index": self.index,
            "made_for": list(self.made_for),
            "digest": self.digest,
            "pages": len(self.pages),
            "entries": len(self.entries),
        }


def age_days(created: dt.datetime, now: dt.datetime | None = None) -> int:
    now = now or dt.datetime.now(dt.timezone.utc)
    return max(0, (now.date() - created.date()).days)


def age_line(created: dt.datetime, now: dt.datetime | None = None) -> str:
    days = age_days(created, now)
    old = "made today" if days == 0 else f"{counted(days, 'day')} old"
    return f"knowledge from {created.date().isoformat()}, {old}"


_active: Snapshot | None = None


def use(snapshot: Snapshot | None) -> None:
    """Answer every index session and the cache from ``snapshot`` (None: as without one)."""
    global _active
    _active = snapshot
    cache.use_overlay(snapshot.entries if snapshot is not None else None)
    hub.stay_offline(snapshot is not None)  # a model id: the Hub's own cache, or a clear no


def active() -> Snapshot | None:
    """The snapshot in use, if any."""
    return _active


def missing(snapshot: Snapshot, what: str, url: str = "") -> NoReturn:
    raise KnowledgeMissing(
        f"The knowledge snapshot {snapshot.path!r} ({snapshot.age()}, from "
        f"{redact(snapshot.index)}) does not hold {what}, and with --knowledge envkit uses "
        "no network.",
        "Make a snapshot that holds it where the index is reachable (envkit knowledge export "
        "FILE --for PROFILE, or --all; add --history for envkit history and for models no "
        "profile loads), then run again with --knowledge FILE.",
        url=redact(url),
        kind="not-in-snapshot",
    )


@dataclass
class NoNetwork(Http):
    """The client of every index session while a snapshot is in use: it sends nothing."""

    snapshot: Snapshot | None = None

    def request(self, method: str, url: str, **_: Any) -> Response:
        assert self.snapshot is not None
        name = unquote(urlsplit(url).path.rstrip("/").rpartition("/")[2]) or url
        missing(self.snapshot, f"what envkit reads from {redact(name)} on the index", url)

    def client(self) -> NoReturn:
        assert self.snapshot is not None
        missing(self.snapshot, "an answer from the network")


# -- writing ---------------------------------------------------------------------------


def _file_dict(f: WheelFile) -> dict[str, Any]:
    return {
        "filename": f.filename,
        "url": redact(f.url),
        "version": str(f.version),
        "size": f.size,
        "upload_time": f.upload_time,
        "requires_python": f.requires_python,
        "sha256": f.sha256,
    }


def _dumps(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, indent=1, allow_nan=False).encode("utf-8")


def write(
    path: Path,
    *,
    index: str,
    made_for: Sequence[str],
    pages: Mapping[str, Listing],
    entries: Mapping[str, str],
    now: dt.datetime | None = None,
) -> Snapshot:
    """Write a snapshot of ``pages`` and cache ``entries`` to ``path``, atomically."""
    members: dict[str, bytes] = {}
    for project, listing in sorted(pages.items()):
        doc = {
            "project": project,
            "wheels": [_file_dict(f) for f in listing.wheels],
            "sdists": [_file_dict(f) for f in listing.sdists],
        }
        members[f"pages/{project}.json"] = _dumps(doc)
    for name, text in sorted(entries.items()):
        members[f"cache/{name}"] = text.encode("utf-8")
    created = (now or dt.datetime.now(dt.timezone.utc)).replace(microsecond=0)
    manifest = _dumps(
        {
            "kind": KIND,
            "format": FORMAT,
            "created": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "envkit": __version__,
            "index": parse_url(index).url.rstrip("/"),
            "made_for": sorted(made_for),
            "entries": [
                {"name": n, "sha256": hashlib.sha256(b).hexdigest(), "bytes": len(b)}
                for n, b in members.items()
            ],
        }
    )
    digest = hashlib.sha256(manifest).hexdigest()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        head = [(MANIFEST, manifest), (DIGEST, f"{digest}\n".encode())]
        for name, data in [*head, *members.items()]:
            info = zipfile.ZipInfo(name, date_time=created.timetuple()[:6])
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    write_atomic(path, buffer.getvalue())
    return read(path)


# -- reading ---------------------------------------------------------------------------


def _bad(path: Path | str, what: str) -> NoReturn:
    raise BadSnapshot(
        f"The knowledge snapshot {str(path)!r} {what}; envkit did not use it.",
        "Use a snapshot written by envkit knowledge export and not changed since, or make a "
        "new one where the index is reachable (envkit knowledge export FILE --all).",
    )


def read(path: Path) -> Snapshot:
    """The snapshot at ``path``, verified whole (see the module's doc); BadSnapshot else."""
    try:
        data = read_small(path, MAX_SNAPSHOT, what="knowledge snapshot")
    except UnreadableFile as exc:
        _bad(path, exc.reason)
    members = _members(path, data)
    manifest = members.get(MANIFEST)
    if manifest is None:
        _bad(path, f"has no {MANIFEST} (it is not a knowledge snapshot)")
    told = members.get(DIGEST, b"").decode("ascii", "replace").strip()
    digest = hashlib.sha256(manifest).hexdigest()
    try:
        doc = Fields(_json(manifest), MANIFEST)
        if doc.text("kind", "") != KIND:
            _bad(path, "is not a knowledge snapshot (its manifest says another kind)")
        if doc.whole("format") != FORMAT:
            _bad(path, f"is of format {doc.whole('format')}; this envkit reads format {FORMAT}")
        if told != digest:
            _bad(path, f"does not match its digest: {MANIFEST} was changed")
        listed = _listed(path, doc, members)
        created = dt.datetime.strptime(doc.text("created"), "%Y-%m-%dT%H:%M:%SZ")
        index = doc.text("index")
        try:
            parse_url(index, MANIFEST)
        except BadInput as exc:
            _bad(path, f"names an index that is not a URL ({exc.message})")
        pages = {m[1]: _listing(members[m[0]], m[1]) for m in listed if m[1]}
        entries = {n.removeprefix("cache/"): members[n].decode("utf-8") for n, p in listed if not p}
        made_for, made_by = doc.texts("made_for"), doc.text("envkit")
    except (BadEntry, ValueError, TypeError, RecursionError) as exc:  # UnicodeError too
        _bad(path, f"is malformed: {exc}")
    return Snapshot(
        str(path),
        created.replace(tzinfo=dt.timezone.utc),
        made_by,
        index,
        made_for,
        digest,
        pages,
        entries,
    )


def _members(path: Path, data: bytes) -> dict[str, bytes]:
    """Every member's bytes, the zip checked within bounds before and while it is read."""
    try:
        start, length = zip_directory(data[-(65_536 + 22) :], len(data), str(path))
        count_entries(data[start : start + length], str(path))
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            infos = archive.infolist()
            if len(infos) > MAX_MEMBERS:
                _bad(path, f"has {len(infos):,} members (at most {MAX_MEMBERS:,})")
            if sum(i.file_size for i in infos) > MAX_INFLATED:
                _bad(path, f"would inflate to more than {MAX_INFLATED // MiB:,} MiB")
            out: dict[str, bytes] = {}
            for info in infos:
                name = info.filename
                if name in out or not _allowed(name):
                    _bad(path, f"holds a member envkit does not write: {name[:200]!r}")
                if info.file_size > MAX_MEMBER or info.compress_type not in (0, 8):
                    _bad(path, f"holds {name!r}: over {MAX_MEMBER // MiB} MiB or packed oddly")
                with archive.open(info) as member:
                    body = member.read(MAX_MEMBER + 1)
                if len(body) > MAX_MEMBER:
                    _bad(path, f"holds {name!r}, larger once inflated than its directory says")
                out[name] = body
            return out
    except WheelError as exc:
        _bad(path, exc.message.partition("; ")[0].removeprefix(str(path)).strip())
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as exc:
        _bad(path, f"is not a readable zip ({exc})")


def _allowed(name: str) -> bool:
    if name in (MANIFEST, DIGEST) or _PAGE.fullmatch(name):
        return True
    rest = name.removeprefix("cache/")
    return rest != name and cache.entry_name_ok(rest)


def _listed(path: Path, doc: Fields, members: Mapping[str, bytes]) -> list[tuple[str, str]]:
    """The manifest's entries, each present with its sha256 and size, and nothing else:
    (member name, project for a page else '')."""
    found: list[tuple[str, str]] = []
    seen: set[str] = set()
    for entry in doc.tables("entries"):
        name, sha = entry.text("name"), entry.text("sha256")
        body = members.get(name)
        if name in seen or name in (MANIFEST, DIGEST) or body is None or not _allowed(name):
            _bad(path, f"lists {name[:200]!r}, which it does not hold")
        if not is_sha256(sha) or hashlib.sha256(body).hexdigest() != sha:
            _bad(path, f"holds {name!r} changed since it was written (its sha256 differs)")
        if entry.whole("bytes") != len(body):
            _bad(path, f"holds {name!r} of another size than its manifest says")
        seen.add(name)
        page = _PAGE.fullmatch(name)
        found.append((name, page.group(1) if page else ""))
    extra = set(members) - seen - {MANIFEST, DIGEST}
    if extra:
        _bad(path, f"holds {sorted(extra)[0]!r}, which its manifest does not list")
    return found


def _json(data: bytes) -> Any:
    def no_constant(name: str) -> Any:
        raise BadEntry(f"{name} is not JSON")

    return json.loads(data.decode("utf-8"), parse_constant=no_constant)


def _listing(data: bytes, project: str) -> Listing:
    doc = Fields(_json(data), f"pages/{project}.json")
    if doc.text("project") != project:
        raise BadEntry(f"pages/{project}.json names another project")
    return Listing(
        tuple(_file(f, ".whl") for f in doc.tables("wheels")),
        tuple(_file(f, ".tar.gz") for f in doc.tables("sdists")),
    )


def _file(f: Fields, suffix: str) -> WheelFile:
    name = f.text("filename")
    if not name.endswith(suffix) or "/" in name:
        raise BadEntry(f"{f.where}: {name[:100]!r} is not a {suffix} file name")
    try:
        version = Version(f.text("version"))
    except InvalidVersion as exc:
        raise BadEntry(f"{f.where}: {exc}") from None
    size = f.data.get("size")
    return WheelFile(
        name,
        f.text("url"),
        f.whole("size") if size is not None else None,
        version,
        f.data.get("upload_time") and f.text("upload_time"),
        f.data.get("requires_python") and f.text("requires_python"),
        f.text("sha256", ""),
    )
