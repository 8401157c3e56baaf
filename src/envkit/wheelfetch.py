"""Reading single files out of published wheels without downloading them.

A wheel is a zip file; its table of contents (the central directory) sits at the end. With
HTTP range requests we read the last bytes, then the central directory, then just the
compressed bytes of the members we want: a few hundred KB out of a 300 MB wheel.

The package index is found like uv and pip find it (``--index-url``, ``$UV_DEFAULT_INDEX``,
``$UV_INDEX_URL``, ``$PIP_INDEX_URL``) and asked through the JSON simple API (PEP 691).
"""

from __future__ import annotations

import json
import os
import struct
import urllib.error
import urllib.parse
import urllib.request
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from packaging.tags import sys_tags
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from .errors import EnvkitError, redact

DEFAULT_INDEX = "https://pypi.org/simple"
USER_AGENT = "envkit (registry scan)"
_SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"


class NetworkError(EnvkitError):
    """The package index (or another server) could not be reached or answered badly."""


class WheelError(EnvkitError):
    """A wheel is not a zip file we can read, or lacks a file we need."""

    exit_code = 1


def index_url(option: str | None = None) -> str:
    for value in (
        option,
        os.environ.get("UV_DEFAULT_INDEX"),
        os.environ.get("UV_INDEX_URL"),
        os.environ.get("PIP_INDEX_URL"),
    ):
        if value:
            return value.rstrip("/")
    return DEFAULT_INDEX


@dataclass
class Traffic:
    """Bytes and requests spent, for reports and the benchmark."""

    requests: int = 0
    bytes: int = 0


@dataclass
class Http:
    timeout: float = 30.0
    traffic: Traffic = field(default_factory=Traffic)

    def get(self, url: str, *, headers: dict[str, str] | None = None) -> bytes:
        request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **(headers or {})})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                data: bytes = response.read()
        except urllib.error.HTTPError as exc:
            raise NetworkError(
                f"{redact(url)} answered HTTP {exc.code} ({exc.reason}).",
                "Check the name and version, or the index URL (--index-url).",
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise NetworkError(
                f"Cannot reach {redact(url)}: {reason}.",
                "Check the network or the index URL (--index-url, UV_DEFAULT_INDEX); "
                "results scanned before are cached and work offline.",
            ) from None
        self.traffic.requests += 1
        self.traffic.bytes += len(data)
        return data

    def get_range(self, url: str, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` inclusive; ``start`` < 0 reads the last -start bytes."""
        spec = f"bytes={start}" if start < 0 else f"bytes={start}-{end}"
        data = self.get(url, headers={"Range": spec})
        want = -start if start < 0 else end - start + 1
        if len(data) > want:  # the server ignored Range and sent everything
            raise NetworkError(
                f"{redact(url)} does not serve byte ranges.",
                "Use an index that supports HTTP range requests, or install the package and "
                "scan it locally.",
            )
        return data


@dataclass(frozen=True)
class WheelFile:
    filename: str
    url: str
    size: int | None
    version: Version
    upload_time: str | None
    requires_python: str | None


def list_files(project: str, index: str, http: Http) -> list[WheelFile]:
    """Every wheel the index lists for ``project``."""
    url = f"{index}/{canonicalize_name(project)}/"
    raw = http.get(url, headers={"Accept": _SIMPLE_JSON})
    try:
        data: dict[str, Any] = json.loads(raw)
    except ValueError:
        raise NetworkError(
            f"{redact(url)} did not answer with the JSON simple API (PEP 691).",
            "Use an index that supports it (uv and PyPI do), via --index-url.",
        ) from None
    files = []
    for entry in data.get("files", []):
        name = entry.get("filename", "")
        if not name.endswith(".whl") or entry.get("yanked"):
            continue
        try:
            _n, version, _b, _t = parse_wheel_filename(name)
        except (ValueError, InvalidVersion):
            continue
        files.append(
            WheelFile(
                name,
                urllib.parse.urljoin(url, entry["url"]),
                entry.get("size"),
                version,
                entry.get("upload-time"),
                entry.get("requires-python"),
            )
        )
    return files


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


@dataclass(frozen=True)
class _Member:
    name: str
    method: int
    compressed: int
    size: int
    offset: int


class RemoteZip:
    """A zip file read through HTTP range requests."""

    def __init__(self, url: str, size: int | None, http: Http) -> None:
        self.url = url
        self.http = http
        self.members = self._central_directory(size)

    def _central_directory(self, size: int | None) -> dict[str, _Member]:
        tail = self.http.get_range(self.url, -65536 - 22, 0)
        pos = tail.rfind(b"PK\x05\x06")
        if pos < 0:
            raise WheelError(f"{redact(self.url)} is not a zip file (no end of directory).")
        _sig, _d, _cd, _n1, count, cd_size, cd_offset, _c = struct.unpack_from(
            "<IHHHHIIH", tail, pos
        )
        if cd_offset == 0xFFFFFFFF or count == 0xFFFF:
            loc = tail.rfind(b"PK\x06\x07", 0, pos)
            if loc < 0:
                raise WheelError(f"{redact(self.url)}: broken zip64 directory.")
            (eocd64,) = struct.unpack_from("<Q", tail, loc + 8)
            rec = self.http.get_range(self.url, eocd64, eocd64 + 55)
            count, cd_size, cd_offset = struct.unpack_from("<QQQ", rec, 32)
        directory = self.http.get_range(self.url, cd_offset, cd_offset + cd_size - 1)
        return dict(_parse_directory(directory, count))

    def read(self, names: Iterable[str]) -> dict[str, bytes]:
        """The contents of ``names`` (members that do not exist are left out)."""
        wanted = sorted(
            (self.members[n] for n in names if n in self.members), key=lambda m: m.offset
        )
        out: dict[str, bytes] = {}
        for group in _nearby(wanted):
            start = group[0].offset
            last = group[-1]
            # local header: 30 bytes, the name, an extra field we guess generously
            end = last.offset + 30 + len(last.name.encode()) + _EXTRA_GUESS + last.compressed
            blob = self.http.get_range(self.url, start, end)
            for member in group:
                at = member.offset - start
                if _local_end(blob, at, member) > len(blob):  # extra field larger than guessed
                    single = self.http.get_range(
                        self.url, member.offset, member.offset + _local_end(blob, at, member) - at
                    )
                    out[member.name] = _extract(single, 0, member)
                else:
                    out[member.name] = _extract(blob, at, member)
        return out


def _parse_directory(data: bytes, count: int) -> Iterator[tuple[str, _Member]]:
    pos = 0
    for _ in range(count):
        if data[pos : pos + 4] != b"PK\x01\x02":
            raise WheelError("The wheel's zip directory is damaged.")
        (method, _t, _d, _crc, comp, size, n_len, x_len, c_len) = struct.unpack_from(
            "<HHHIIIHHH", data, pos + 10
        )
        (offset,) = struct.unpack_from("<I", data, pos + 42)
        name = data[pos + 46 : pos + 46 + n_len].decode("utf-8", "replace")
        extra = data[pos + 46 + n_len : pos + 46 + n_len + x_len]
        if 0xFFFFFFFF in (comp, size, offset):
            comp, size, offset = _zip64(extra, comp, size, offset)
        yield name, _Member(name, method, comp, size, offset)
        pos += 46 + n_len + x_len + c_len


def _zip64(extra: bytes, comp: int, size: int, offset: int) -> tuple[int, int, int]:
    pos = 0
    while pos + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, pos)
        if tag == 1:
            values = list(struct.unpack_from(f"<{length // 8}Q", extra, pos + 4))
            if size == 0xFFFFFFFF:
                size = values.pop(0)
            if comp == 0xFFFFFFFF:
                comp = values.pop(0)
            if offset == 0xFFFFFFFF:
                offset = values.pop(0)
        pos += 4 + length
    return comp, size, offset


def _nearby(members: list[_Member], gap: int = 256 * 1024) -> Iterator[list[_Member]]:
    """Group members whose bytes lie close together, to read each group with one request."""
    group: list[_Member] = []
    for member in members:
        if group and member.offset - (group[-1].offset + group[-1].compressed) > gap:
            yield group
            group = []
        group.append(member)
    if group:
        yield group


_EXTRA_GUESS = 256


def _local_end(blob: bytes, at: int, member: _Member) -> int:
    """Where ``member``'s compressed bytes end in ``blob`` (its local header read there)."""
    n_len, x_len = struct.unpack_from("<HH", blob, at + 26)
    return int(at + 30 + n_len + x_len + member.compressed)


def _extract(blob: bytes, at: int, member: _Member) -> bytes:
    if blob[at : at + 4] != b"PK\x03\x04":
        raise WheelError(f"The wheel's entry for {member.name} is damaged.")
    n_len, x_len = struct.unpack_from("<HH", blob, at + 26)
    start = at + 30 + n_len + x_len
    data = blob[start : start + member.compressed]
    if member.method == 0:
        return data
    if member.method == 8:
        return zlib.decompressobj(-15).decompress(data)
    raise WheelError(f"{member.name} uses zip compression method {member.method}.")
