"""Package index pages: which files a project publishes, and choosing a wheel among them.

The index (``io.urls.index_url``: chosen as uv chooses it) is read in the JSON simple API
(PEP 691) or, from indexes that only serve it, the HTML one (PEP 503). Every answer is
checked before use: a page is capped in bytes and in the files it lists (counted while it is
parsed, so a page of a million entries is refused before it is built), and a malformed page
is a NetworkError naming the URL, never a traceback.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urldefrag, urljoin

from packaging.tags import sys_tags
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from envkit.errors import NetworkError, WheelError
from envkit.io.cache import is_sha256
from envkit.io.http import Http, MiB, status_error
from envkit.io.redaction import redact

_ACCEPT = (
    "application/vnd.pypi.simple.v1+json, "
    "application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
)
# the largest page envkit reads, torch's, is 420 KB with 987 files
MAX_INDEX_PAGE = 16 * MiB
MAX_INDEX_ENTRIES = 20_000  # files one page may list, counted as the page is parsed
# values (JSON: commas) or tags (HTML: '<') one page may hold, counted before it is parsed;
# torch's page has 7.3 commas a file, PEP 503 pages 3 tags a link
MAX_PAGE_ITEMS = 8 * MAX_INDEX_ENTRIES


@dataclass(frozen=True)
class WheelFile:
    filename: str
    url: str
    size: int | None
    version: Version
    upload_time: str | None
    requires_python: str | None
    sha256: str = ""  # the index's hash of the file ('' when it gives none)


def _index_entries(project: str, index: str, http: Http) -> tuple[list[dict[str, Any]], str]:
    """The file entries of ``project``'s index page, and the page's URL (for relative links)."""
    url = f"{index}/{canonicalize_name(project)}/"
    answer = http.request("GET", url, headers={"Accept": _ACCEPT}, max_bytes=MAX_INDEX_PAGE)
    if answer.status != 200:
        raise status_error(url, answer.status)
    kind = answer.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind.endswith("json") or answer.body.lstrip()[:1] == b"{":
        return _json_entries(answer.body, url), answer.url
    return html_entries(answer.text(), url), answer.url


def list_page(project: str, index: str, http: Http) -> tuple[list[WheelFile], list[WheelFile]]:
    """The wheels and the source distributions (``.tar.gz``) ``project``'s index page
    lists, from one read of it (yanked files left out), each version parsed from the name."""
    entries, page = _index_entries(project, index, http)
    wheels: list[WheelFile] = []
    sdists: list[WheelFile] = []
    for entry in entries:
        name, href = entry.get("filename"), entry.get("url")
        if not isinstance(name, str) or not isinstance(href, str):
            continue
        kind = wheels if name.endswith(".whl") else sdists if name.endswith(".tar.gz") else None
        version = _version_of(project, name) if kind is not None else None
        if kind is None or version is None or entry.get("yanked") not in (None, False):
            continue
        size, upload = entry.get("size"), entry.get("upload-time")
        requires = entry.get("requires-python")
        kind.append(
            WheelFile(
                name,
                urljoin(page, href),
                size if isinstance(size, int) and not isinstance(size, bool) else None,
                version,
                upload if isinstance(upload, str) else None,
                requires if isinstance(requires, str) else None,
                file_sha256(entry),
            )
        )
    return wheels, sdists


def file_sha256(entry: dict[str, Any]) -> str:
    """A page entry's sha256: PEP 691's ``hashes``, else PEP 503's ``#sha256=`` fragment;
    '' when the page gives none or one that is not 64 hex digits."""
    hashes = entry.get("hashes")
    found = hashes.get("sha256") if isinstance(hashes, dict) else None
    if not isinstance(found, str):
        fragment = urldefrag(str(entry.get("url", ""))).fragment
        found = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else ""
    found = found.lower()
    return found if is_sha256(found) else ""


def _version_of(project: str, name: str) -> Version | None:
    try:
        if name.endswith(".whl"):
            return parse_wheel_filename(name)[1]
        base, _dash, text = name[: -len(".tar.gz")].rpartition("-")
        same = canonicalize_name(base) == canonicalize_name(project)
        return Version(text) if same else None
    except (InvalidWheelFilename, InvalidVersion, ValueError):
        return None


def _json_entries(body: bytes, url: str) -> list[dict[str, Any]]:
    objects = 0

    def counted(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal objects  # every object of the page: a file entry, its hashes, its metadata
        objects += 1
        if objects > 4 * MAX_INDEX_ENTRIES:
            raise _TooMany
        return dict(pairs)

    if body.count(b",") > MAX_PAGE_ITEMS:
        raise _too_many(url)
    try:
        data = json.loads(body, object_pairs_hook=counted)
    except _TooMany:
        raise _too_many(url) from None
    except (ValueError, RecursionError):
        raise _bad_page(url, "is not valid JSON") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list):
        raise _bad_page(url, "has no list of files")
    if len(files) > MAX_INDEX_ENTRIES:
        raise _too_many(url)
    return [f for f in files if isinstance(f, dict)]


class _TooMany(Exception):
    """A page lists more files than MAX_INDEX_ENTRIES (raised while it is parsed)."""


def _too_many(url: str) -> NetworkError:
    return _bad_page(url, f"lists more than {MAX_INDEX_ENTRIES:,} files")


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
        if len(self.entries) >= MAX_INDEX_ENTRIES:
            raise _TooMany
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


def html_entries(text: str, url: str = "") -> list[dict[str, Any]]:
    """The anchors of a PEP 503 page; NetworkError past MAX_INDEX_ENTRIES of them."""
    if text.count("<") > MAX_PAGE_ITEMS:
        raise _too_many(url)
    parser = _Links()
    try:
        parser.feed(text)
        parser.close()
    except _TooMany:
        raise _too_many(url) from None
    return parser.entries


@functools.cache
def _our_tags() -> frozenset[str]:
    """This interpreter's wheel tags (asked once a process: history picks a wheel for each of
    up to 1,000 releases, and each ask walks the platform's hundreds of tags)."""
    return frozenset(str(t) for t in sys_tags())


def pick_wheel(files: Iterable[WheelFile], version: Version) -> WheelFile:
    """One wheel of that version: one for this machine if there is, else a Linux x86_64 one.
    WheelError (see :func:`no_wheel`) when ``files`` hold none of it.

    The Python sources scanned are the same in every wheel of a release.
    """
    files = list(files)
    candidates = [f for f in files if f.version == version]
    if not candidates:
        raise no_wheel(files, version)
    ours = _our_tags()

    def rank(f: WheelFile) -> tuple[int, int]:
        tags = {str(t) for t in parse_wheel_filename(f.filename)[3]}
        return (0 if tags & ours else 1 if any("x86_64" in t for t in tags) else 2, f.size or 0)

    return sorted(candidates, key=rank)[0]


def no_wheel(
    files: list[WheelFile], version: Version, *, project: str = "", index: str = ""
) -> WheelError:
    """The index lists no wheel of ``version``: of which project (``project``, else read
    from ``files``, the project's wheels), on which index, and the newest release it lists."""
    if not project and files:
        try:
            project = str(parse_wheel_filename(files[0].filename)[0])
        except InvalidWheelFilename:
            project = ""
    newest = max((f.version for f in files if not f.version.is_prerelease), default=None)
    where = f"the index {redact(index)}" if index else "the index"
    said = f"{project} {version}" if project else f"Version {version}"
    return WheelError(
        f"{said}: {where} lists no wheel of it"
        + (f" (its newest release with a wheel is {newest})." if newest else "."),
        f"Give a release the index publishes, such as {project or 'PROJECT'}=={newest}."
        if newest
        else "Check the version and the project's name.",
    )


def pick_linux_wheel(
    files: Iterable[WheelFile], version: Version, python: int = 12, machine: str = "x86_64"
) -> WheelFile | None:
    """The Linux ``machine`` (x86_64 or aarch64) wheel of ``version`` that uv picks for
    CPython 3.``python``: a ``cp3X-cp3X`` wheel for it, else an ``abi3`` one it can load, else
    (a release built only for older Pythons) the newest CPython's; the highest build tag wins
    a tie. None when the release has no Linux wheel for that machine."""

    def rank(f: WheelFile) -> tuple[int, int, int] | None:
        try:
            _name, _version, build, tags = parse_wheel_filename(f.filename)
        except InvalidWheelFilename:
            return None
        best: tuple[int, int] | None = None
        for tag in tags:
            if not (tag.platform.endswith(machine) and "linux" in tag.platform):
                continue
            minor = _cpython_minor(tag.interpreter)
            if tag.abi == tag.interpreter and minor == python:
                score = (0, 0)
            elif tag.abi == "abi3" and minor is not None and minor <= python:
                score = (1, -minor)
            elif tag.interpreter.startswith("py3") and tag.abi == "none":
                score = (2, 0)
            elif minor is not None:
                score = (3, -minor)
            else:
                continue
            best = score if best is None else min(best, score)
        return None if best is None else (*best, -(build[0] if build else -1))

    ranked = [(r, f.filename, f) for f in files if f.version == version and (r := rank(f))]
    return min(ranked, key=lambda item: (item[0], item[1]))[2] if ranked else None


def _cpython_minor(interpreter: str) -> int | None:
    text = interpreter.removeprefix("cp3")
    return int(text) if interpreter.startswith("cp3") and text.isdigit() else None
