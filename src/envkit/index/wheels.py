"""Reading single files out of published wheels without downloading them.

A wheel is a zip file; its table of contents (the central directory) sits at the end. The
standard library's ``zipfile`` reads it through :class:`RemoteFile`, a seekable view of the
URL that fetches only the byte ranges zipfile asks for (in blocks, cached): the directory,
then the few members envkit wants, a few hundred KB out of a 300 MB wheel.

The package index is chosen as uv chooses it (``--index-url``, then ``$UV_DEFAULT_INDEX``,
then ``$UV_INDEX_URL``) and read in the JSON simple API (PEP 691) or, from indexes that
only serve it, the HTML one (PEP 503). Every answer is checked before use: a malformed page
is a NetworkError naming the URL, never a traceback.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit
from urllib.request import url2pathname

from packaging.tags import sys_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from envkit.errors import NetworkError, WheelError
from envkit.io.http import Http, MiB, Traffic, status_error
from envkit.io.redaction import redact
from envkit.io.urls import check_index

__all__ = ["Http", "RemoteZip", "Traffic", "WheelFile", "index_url", "list_files", "pick_wheel"]

DEFAULT_INDEX = "https://pypi.org/simple"
_ACCEPT = (
    "application/vnd.pypi.simple.v1+json, "
    "application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
)
MAX_INDEX_PAGE = 64 * MiB  # the largest real project pages are a few MB
MAX_MEMBER = 16 * MiB  # inflated size of one source file read; real registries are < 1 MB
MAX_WHEEL_READ = 64 * MiB  # everything read out of one wheel
_BLOCK = 64 * 1024
PARALLEL_RANGES = 4  # range requests in flight at once for one file


def index_url(option: str | None = None) -> str:
    """The index, as uv picks its default one: the option, ``$UV_DEFAULT_INDEX``,
    ``$UV_INDEX_URL`` (uv's older name), else PyPI."""
    for value, where in (
        (option, "--index-url"),
        (os.environ.get("UV_DEFAULT_INDEX"), "UV_DEFAULT_INDEX"),
        (os.environ.get("UV_INDEX_URL"), "UV_INDEX_URL"),
    ):
        if value and value.strip():
            return check_index(value, where)
    return DEFAULT_INDEX


@dataclass(frozen=True)
class WheelFile:
    filename: str
    url: str
    size: int | None
    version: Version
    upload_time: str | None
    requires_python: str | None


def _index_entries(project: str, index: str, http: Http) -> tuple[list[dict[str, Any]], str]:
    """The file entries of ``project``'s index page, and the page's URL (for relative links)."""
    url = f"{index}/{canonicalize_name(project)}/"
    answer = http.request("GET", url, headers={"Accept": _ACCEPT}, max_bytes=MAX_INDEX_PAGE)
    if answer.status != 200:
        raise status_error(url, answer.status)
    kind = answer.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind.endswith("json") or answer.body.lstrip()[:1] == b"{":
        return _json_entries(answer.body, url), answer.url
    return html_entries(answer.text()), answer.url


def _files(project: str, index: str, http: Http, suffix: str) -> Iterator[WheelFile]:
    """The index's files of ``project`` ending in ``suffix`` (yanked ones left out), their
    version parsed from the name (``name`` -> None to skip a file)."""
    entries, page = _index_entries(project, index, http)
    for entry in entries:
        name, href = entry.get("filename"), entry.get("url")
        if not isinstance(name, str) or not isinstance(href, str) or not name.endswith(suffix):
            continue
        version = _version_of(project, name)
        if version is None or entry.get("yanked") not in (None, False):
            continue
        size, upload = entry.get("size"), entry.get("upload-time")
        requires = entry.get("requires-python")
        yield WheelFile(
            name,
            urljoin(page, href),
            size if isinstance(size, int) and not isinstance(size, bool) else None,
            version,
            upload if isinstance(upload, str) else None,
            requires if isinstance(requires, str) else None,
        )


def _version_of(project: str, name: str) -> Version | None:
    try:
        if name.endswith(".whl"):
            return parse_wheel_filename(name)[1]
        base, _dash, text = name[: -len(".tar.gz")].rpartition("-")
        same = canonicalize_name(base) == canonicalize_name(project)
        return Version(text) if same else None
    except (InvalidWheelFilename, InvalidVersion, ValueError):
        return None


def list_sdists(project: str, index: str, http: Http) -> dict[Version, WheelFile]:
    """The source distribution (``.tar.gz``) of each release, by version."""
    return {f.version: f for f in _files(project, index, http, ".tar.gz")}


def list_files(project: str, index: str, http: Http) -> list[WheelFile]:
    """Every wheel the index lists for ``project`` (yanked ones left out)."""
    return list(_files(project, index, http, ".whl"))


def _json_entries(body: bytes, url: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        raise _bad_page(url, "is not valid JSON") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        raise _bad_page(url, "has no list of files")
    return [f for f in files if isinstance(f, dict)]


def _bad_page(url: str, what: str) -> NetworkError:
    return NetworkError(
        f"The index page {redact(url)} {what} (PEP 691 JSON or PEP 503 HTML expected).",
        "Check --index-url (or UV_DEFAULT_INDEX): it must be a simple-API index.",
        url=redact(url),
    )


class _Links(HTMLParser):
    """The anchors of a PEP 503 page: file name, URL, and the data-* attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.entries: list[dict[str, Any]] = []
        self._open: dict[str, Any] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "a":
            return
        values = dict(attrs)
        href = values.get("href")
        if not href:
            return
        link, _fragment = urldefrag(href)
        self._open = {
            "url": href,
            "filename": link.rstrip("/").rpartition("/")[2],
            "yanked": True if "data-yanked" in values else None,
            "requires-python": values.get("data-requires-python"),
        }
        self.entries.append(self._open)

    def handle_data(self, data: str) -> None:
        if self._open is not None and data.strip():
            self._open["filename"] = data.strip()

    def handle_endtag(self, tag: str) -> None:
        if tag == "a":
            self._open = None


def html_entries(text: str) -> list[dict[str, Any]]:
    parser = _Links()
    parser.feed(text)
    parser.close()
    return parser.entries


def pick_wheel(files: Iterable[WheelFile], version: Version) -> WheelFile:
    """One wheel of that version: one for this machine if there is, else a Linux x86_64 one.

    The Python sources scanned are the same in every wheel of a release.
    """
    candidates = [f for f in files if f.version == version]
    if not candidates:
        raise WheelError(f"No wheel of version {version} is listed.", "Check the version.")
    ours = {str(t) for t in sys_tags()}

    def rank(f: WheelFile) -> tuple[int, int]:
        tags = {str(t) for t in parse_wheel_filename(f.filename)[3]}
        return (0 if tags & ours else 1 if any("x86_64" in t for t in tags) else 2, f.size or 0)

    return sorted(candidates, key=rank)[0]


class RemoteFile(io.RawIOBase):
    """A read-only, seekable view of a URL, fetched in byte ranges as it is read."""

    def __init__(self, url: str, http: Http, *, budget: int = MAX_WHEEL_READ) -> None:
        super().__init__()
        self.url = url
        self.http = http
        self.budget = budget
        self.fetched = 0
        self.pos = 0
        tail, total = http.get_range(url, -_BLOCK, 0)
        if total is None:
            raise NetworkError(
                f"{redact(url)} did not say how large the file is (no Content-Range).",
                "Use an index that supports HTTP range requests.",
                url=redact(url),
            )
        self.size = total
        self._blocks: list[tuple[int, bytes]] = [(total - len(tail), tail)]

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self._slice(self.pos, min(self.pos + len(view), self.size))
        view[: len(data)] = data
        self.pos += len(data)
        return len(data)

    def _slice(self, start: int, end: int) -> bytes:
        if start >= end:
            return b""
        for at, block in self._blocks:
            if at <= start and end <= at + len(block):
                return block[start - at : end - at]
        block = self._fetch(start, min(self.size, max(end, start + _BLOCK)))
        return block[: end - start]

    def covered(self, start: int, end: int) -> bool:
        return any(at <= start and end <= at + len(b) for at, b in self._blocks)

    def prefetch(self, spans: Iterable[tuple[int, int]]) -> None:
        """Fetch each ``[start, end)`` span in one request (a few at a time), for the reads
        that follow."""
        todo = [(a, b) for a, b in spans if not self.covered(a, b)]
        for start, end in todo:
            self._spend(end - start)
        if len(todo) == 1:
            self._get(*todo[0])
            return
        with ThreadPoolExecutor(max_workers=PARALLEL_RANGES) as pool:
            for future in [pool.submit(self._get, a, b) for a, b in todo]:
                future.result()

    def _fetch(self, start: int, end: int) -> bytes:
        self._spend(end - start)
        return self._get(start, end)

    def _spend(self, size: int) -> None:
        self.fetched += size
        if self.fetched > self.budget:
            raise WheelError(
                f"Reading {redact(self.url)} needed more than {self.budget:,} bytes.",
                "The wheel is not laid out as expected; envkit stops rather than download it.",
            )

    def _get(self, start: int, end: int) -> bytes:
        block, _total = self.http.get_range(self.url, start, end - 1)
        self._blocks.append((start, block))
        return block


class RemoteZip:
    """A zip file read through HTTP range requests, by the standard library's zipfile."""

    def __init__(self, url: str, http: Http, *, budget: int = MAX_WHEEL_READ) -> None:
        """The size is the one the server's Content-Range gives, not the index's."""
        self.url = url
        self._file = RemoteFile(url, http, budget=budget)
        try:
            self._zip = zipfile.ZipFile(self._file)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as exc:
            raise WheelError(f"{redact(url)} is not a zip file envkit can read ({exc}).") from None
        self.members = {info.filename: info for info in self._zip.infolist()}
        starts = sorted({i.header_offset for i in self.members.values()})
        directory = getattr(self._zip, "start_dir", self._file.size)
        # where each member's bytes end: the next member's start (or the central directory)
        self._ends = dict(zip(starts, [*starts[1:], directory], strict=True))

    def _spans(self, names: Iterable[str], limit: int) -> list[tuple[int, int]]:
        """The byte spans holding ``names``, neighbours less than a block apart joined."""
        spans: list[list[int]] = []
        wanted = [self.members[n] for n in names if n in self.members]
        for info in sorted((i for i in wanted if i.file_size <= limit), key=_offset):
            start = info.header_offset
            most = start + info.compress_size + len(info.filename) + _BLOCK  # headers' slack
            end = max(min(self._ends.get(start, most), most), start + 1)
            if spans and start - spans[-1][1] <= _BLOCK:
                spans[-1][1] = max(spans[-1][1], end)
            else:
                spans.append([start, end])
        return [(a, b) for a, b in spans]

    def read(self, names: Iterable[str], limit: int = MAX_MEMBER) -> dict[str, bytes]:
        """The contents of ``names`` (members that do not exist are left out). Each member is
        inflated as a stream and refused past ``limit`` bytes (a zip bomb ends here)."""
        names = list(names)
        self._file.prefetch(self._spans(names, limit))
        return _members(self._zip, self.url, names, limit)


def read_members(url: str, http: Http, names: Iterable[str]) -> dict[str, bytes]:
    """Members of the wheel at ``url``: by range for http(s), from the disk for a file://
    URL (a local index, as uv takes one), within the same limits either way."""
    if not url.lower().startswith("file://"):
        return RemoteZip(url, http).read(names)
    path = url2pathname(urlsplit(url).path)
    try:
        with zipfile.ZipFile(path) as local:
            return _members(local, url, list(names), MAX_MEMBER)
    except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile) as exc:
        raise WheelError(f"{redact(url)} is not a zip file envkit can read ({exc}).") from None


def _members(archive: zipfile.ZipFile, url: str, names: list[str], limit: int) -> dict[str, bytes]:
    """Each member inflated as a stream and refused past ``limit`` bytes (a zip bomb ends
    here); members that do not exist are left out."""
    out: dict[str, bytes] = {}
    for name in names:
        try:
            info = archive.getinfo(name)
        except KeyError:
            continue
        if info.file_size > limit:
            raise _member_too_large(url, name, limit)
        try:
            with archive.open(info) as member:
                data = member.read(limit + 1)
        except (zipfile.BadZipFile, zlib.error, NotImplementedError, EOFError) as exc:
            raise WheelError(
                f"{name} in {redact(url)} is damaged ({exc}).",
                "Try again later; if it persists, the published wheel is broken.",
            ) from None
        if len(data) > limit:
            raise _member_too_large(url, name, limit)
        out[name] = data
    return out


def _offset(info: zipfile.ZipInfo) -> int:
    return info.header_offset


def _member_too_large(url: str, name: str, limit: int) -> WheelError:
    return WheelError(
        f"{name} in {redact(url)} inflates to more than {limit:,} bytes; envkit reads source "
        "files far smaller than that.",
        "The wheel is not what it claims to be (a zip bomb?); envkit stopped reading it.",
    )
