"""Reading single files out of published wheels without downloading them.

A wheel is a zip file; its table of contents (the central directory) sits at the end. The
standard library's ``zipfile`` reads it through :class:`RemoteFile`, a seekable view of the
URL that fetches only the byte ranges zipfile asks for (in blocks, cached): the directory,
then the few members envkit wants, a few hundred KB out of a 300 MB wheel. The directory's
size and entry count are checked (index.archives) before zipfile builds it, every byte
fetched counts against a budget, and every member is inflated as a stream within a cap.

A large compiled member (a 300 MB kernel library) is not read that way: :meth:`RemoteZip.inflate`
streams it, its compressed bytes fetched in ranges a few at a time and inflated into a file
as they arrive, within a compressed cap, an inflated cap and a time budget, its size and
CRC-32 checked against the directory at the end.
"""

from __future__ import annotations

import io
import struct
import time
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, BinaryIO
from urllib.parse import urlsplit

from envkit.errors import NetworkError, UnreadableFile, WheelError
from envkit.index.archives import count_entries, zip_directory
from envkit.io import interrupts
from envkit.io.files import open_regular
from envkit.io.http import Http, MiB
from envkit.io.redaction import redact

MAX_MEMBER = 16 * MiB  # inflated size of one source file read; real registries are < 1 MB
MAX_WHEEL_READ = 64 * MiB  # everything read out of one wheel
_BLOCK = 64 * 1024
PARALLEL_RANGES = 4  # range requests in flight at once for one file
STREAM_CHUNK = 8 * MiB  # one range request of a member streamed by RemoteZip.inflate
INFLATE_PIECE = 16 * MiB  # inflated at a time: memory stays bounded whatever the ratio
_LOCAL_HEADER = 30


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

    def tail(self) -> bytes:
        """The file's last bytes (a block, or all of a smaller file), fetched on opening."""
        return self._blocks[0][1]

    def read_span(self, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` (one request when not fetched yet), within the budget."""
        return self._slice(max(0, start), min(end, self.size))

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
        with interrupts.thread_pool(PARALLEL_RANGES) as pool:
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
        # the directory's size and entry count are checked before zipfile builds it
        start, length = zip_directory(self._file.tail(), self._file.size, url)
        if length:
            count_entries(self._file.read_span(start, start + length), url)
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

    def inflate(
        self, name: str, out: BinaryIO, *, max_compressed: int, max_inflated: int, seconds: float
    ) -> int:
        """Member ``name`` inflated into ``out`` as its bytes arrive; the inflated size.
        WheelError when it is absent, stored in a way envkit does not read, larger than
        either cap (refused before any of it is fetched, when the directory says so), slower
        than ``seconds``, or when what arrives does not inflate to the size and CRC-32 the
        directory gives."""
        info = self.members.get(name)
        if info is None:
            raise WheelError(f"{redact(self.url)} has no member {name}.")
        if info.compress_size > max_compressed:
            raise _damaged(
                self.url,
                name,
                f"{info.compress_size:,} bytes compressed, over "
                f"the {max_compressed:,} envkit fetches",
            )
        if info.file_size > max_inflated:
            raise _damaged(
                self.url,
                name,
                f"it inflates to {info.file_size:,} bytes, over the {max_inflated:,} envkit reads",
            )
        if (
            info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
            or info.flag_bits & 1
        ):
            raise _damaged(self.url, name, f"stored with method {info.compress_type}")
        start = self._data_start(info)
        ends = time.monotonic() + seconds
        inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        written, crc = 0, 0
        for body in self._chunks(start, start + info.compress_size):
            if time.monotonic() > ends:
                raise _damaged(self.url, name, f"not read within {seconds:.0f} s")
            pending = body
            while pending:
                if info.compress_type == zipfile.ZIP_STORED:
                    piece, pending = pending, b""
                else:
                    try:
                        piece = inflater.decompress(pending, INFLATE_PIECE)
                    except zlib.error as exc:
                        raise _damaged(self.url, name, f"it does not inflate ({exc})") from None
                    pending = inflater.unconsumed_tail
                written += len(piece)
                if written > min(max_inflated, info.file_size):
                    raise _damaged(self.url, name, "it inflates to more bytes than listed")
                crc = zlib.crc32(piece, crc)
                out.write(piece)
        done = info.compress_type == zipfile.ZIP_STORED or (inflater.eof and not inflater.flush())
        if not done or written != info.file_size or crc != info.CRC:
            raise _damaged(self.url, name, "its bytes do not inflate to the size and CRC-32 listed")
        return written

    def _data_start(self, info: zipfile.ZipInfo) -> int:
        """Where a member's compressed bytes start, from its local header, checked to lie
        before the next member."""
        at = info.header_offset
        header = self._file.read_span(at, at + _LOCAL_HEADER)
        if len(header) < _LOCAL_HEADER or header[:4] != b"PK\x03\x04":
            raise _damaged(self.url, info.filename, "no local header where the directory says")
        name_length, extra_length = struct.unpack_from("<HH", header, 26)
        start = int(at) + _LOCAL_HEADER + int(name_length) + int(extra_length)
        if start + info.compress_size > self._ends.get(at, self._file.size):
            raise _damaged(self.url, info.filename, "it overlaps the next member")
        return start

    def _chunks(self, start: int, end: int) -> Iterator[bytes]:
        """Bytes ``start`` to ``end`` in order, in ranges of STREAM_CHUNK, a few in flight."""
        http, url = self._file.http, self.url

        def get(a: int, b: int) -> bytes:
            body, _total = http.get_range(url, a, b - 1)
            if len(body) != b - a:
                raise _damaged(url, "a member", f"a range of {b - a} bytes came as {len(body)}")
            return body

        spans = [(a, min(a + STREAM_CHUNK, end)) for a in range(start, end, STREAM_CHUNK)]
        with interrupts.thread_pool(PARALLEL_RANGES) as pool:
            window: list[Future[bytes]] = []
            for span in spans:
                window.append(pool.submit(get, *span))
                if len(window) >= PARALLEL_RANGES:
                    yield window.pop(0).result()
            while window:
                yield window.pop(0).result()

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
    from urllib.request import url2pathname  # (http.client and email with it: file:// only)

    path = url2pathname(urlsplit(url).path)
    try:
        with open_regular(path, what="wheel") as handle:
            _check_directory(handle, url)
            with zipfile.ZipFile(handle) as local:
                return _members(local, url, list(names), MAX_MEMBER)
    except UnreadableFile as exc:
        raise WheelError(f"{redact(url)} {exc.reason}.") from None
    except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile) as exc:
        raise WheelError(f"{redact(url)} is not a zip file envkit can read ({exc}).") from None


class LocalZip:
    """A wheel on disk (a file:// index, as uv takes one) read as :class:`RemoteZip` reads
    one by range: its ``members``, small members by :meth:`read`, a large one streamed by
    :meth:`inflate`, within the same caps. Use as a context manager. Raises WheelError."""

    def __init__(self, url: str) -> None:
        self.url = url
        from urllib.request import url2pathname  # urllib.request is slow to import

        path = url2pathname(urlsplit(url).path)
        try:
            self._handle = open_regular(path, what="wheel")
        except UnreadableFile as exc:
            raise WheelError(f"{redact(url)} {exc.reason}.") from None
        try:
            _check_directory(self._handle, url)
            self._zip = zipfile.ZipFile(self._handle)
        except (OSError, zipfile.BadZipFile, zipfile.LargeZipFile, ValueError) as exc:
            self._handle.close()
            raise WheelError(f"{redact(url)} is not a zip file envkit can read ({exc}).") from None
        except BaseException:
            self._handle.close()
            raise
        self.members = {info.filename: info for info in self._zip.infolist()}

    def __enter__(self) -> LocalZip:
        return self

    def __exit__(self, *_: object) -> None:
        self._zip.close()
        self._handle.close()

    def read(self, names: Iterable[str], limit: int = MAX_MEMBER) -> dict[str, bytes]:
        return _members(self._zip, self.url, list(names), limit)

    def inflate(
        self, name: str, out: BinaryIO, *, max_compressed: int, max_inflated: int, seconds: float
    ) -> int:
        """As :meth:`RemoteZip.inflate`, from the disk (zipfile checks the CRC-32)."""
        info = self.members.get(name)
        if info is None:
            raise WheelError(f"{redact(self.url)} has no member {name}.")
        if info.compress_size > max_compressed or info.file_size > max_inflated:
            raise _damaged(self.url, name, "it is larger than envkit reads")
        ends = time.monotonic() + seconds
        written = 0
        try:
            with self._zip.open(info) as member:
                while piece := member.read(INFLATE_PIECE):
                    written += len(piece)
                    if written > min(max_inflated, info.file_size):
                        raise _damaged(self.url, name, "it inflates to more bytes than listed")
                    if time.monotonic() > ends:
                        raise _damaged(self.url, name, f"not read within {seconds:.0f} s")
                    out.write(piece)
        except (zipfile.BadZipFile, zlib.error, NotImplementedError, EOFError) as exc:
            raise _damaged(self.url, name, f"it does not inflate ({exc})") from None
        return written


@contextmanager
def open_wheel(url: str, http: Http) -> Iterator[RemoteZip | LocalZip]:
    """The wheel at ``url``: by range for http(s), from the disk for file://."""
    if url.lower().startswith("file://"):
        with LocalZip(url) as local:
            yield local
    else:
        yield RemoteZip(url, http)


def _check_directory(handle: BinaryIO, url: str) -> None:
    """The caps RemoteZip holds a remote wheel's directory to, for a wheel on disk."""
    size = handle.seek(0, io.SEEK_END)
    handle.seek(max(0, size - _BLOCK))
    start, length = zip_directory(handle.read(_BLOCK), size, url)
    if length:
        handle.seek(start)
        count_entries(handle.read(length), url)


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


def _damaged(url: str, name: str, why: str) -> WheelError:
    return WheelError(
        f"{name} in {redact(url)} cannot be read: {why}.",
        "Try again later; if it persists, the published wheel is broken.",
    )


def _member_too_large(url: str, name: str, limit: int) -> WheelError:
    return WheelError(
        f"{name} in {redact(url)} inflates to more than {limit:,} bytes; envkit reads source "
        "files far smaller than that.",
        "The wheel is not what it claims to be (a zip bomb?); envkit stopped reading it.",
    )
