"""Archives from an index, read within bounds of work as well as of bytes.

A download cap bounds what arrives, not what it inflates to or how long reading it takes:
a 2 MB gzip stream can inflate to gigabytes, a 7 MB sdist can hold a million members, and a
zip's directory can list a million entries. Here every archive is walked with its costs
counted before they are paid:

- **Source distributions** (``.tar.gz``) are inflated as a stream and walked header by
  header (never with ``tarfile``, which keeps every member it has seen and reads a
  header's extension data whole): at most :data:`MAX_MEMBERS` members, none declaring more
  than :data:`MAX_MEMBER` bytes, at most :data:`MAX_INFLATED` bytes inflated in all, within
  a deadline on the time spent reading (not waiting for bytes: the archive may be read as
  it downloads, and reading stops once the members asked for are found).
- **Zip directories** (wheels) are checked from their end record before ``zipfile`` parses
  them: at most :data:`MAX_ZIP_ENTRIES` entries in at most :data:`MAX_ZIP_DIRECTORY` bytes.

Every refusal is a WheelError (exit 2) naming the archive and the cap.
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Callable, Iterable, Iterator

from envkit.errors import WheelError
from envkit.io.files import MiB
from envkit.io.redaction import redact

# vLLM 0.33.0's sdist: 9,629 members, 153 MB inflated (47 MB), its largest member 7.3 MB
MAX_MEMBERS = 100_000
MAX_MEMBER = 64 * MiB
MAX_INFLATED = 1024 * MiB
INFLATE_SECONDS = 30.0
MAX_EXTENSION = 1 * MiB  # a pax or GNU long-name header's own data
# torch 2.6.0's wheel: 11,402 entries in a 1.3 MB directory
MAX_ZIP_ENTRIES = 100_000
MAX_ZIP_DIRECTORY = 16 * MiB
_BLOCK = 512
_CHUNK = 256 * 1024


class _Inflated:
    """The inflated bytes of a gzip stream, read in order and counted against the caps."""

    def __init__(self, body: Iterable[bytes], url: str, cap: int, seconds: float) -> None:
        self._body = iter(body)  # the compressed bytes, in pieces of any size
        self._ended = False
        self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip framing
        self._chunk = b""  # the last inflated piece, read from _pos on
        self._pos = 0
        self._url = url
        self._cap = cap
        self._seconds = seconds
        self._ends = time.monotonic() + seconds  # moved on by the time spent waiting for bytes
        self.total = 0

    def read(self, size: int) -> bytes:
        """``size`` bytes (fewer only at the end of the stream)."""
        parts = []
        while size > 0 and (self._pos < len(self._chunk) or self._more()):
            piece = self._chunk[self._pos : self._pos + size]
            self._pos += len(piece)
            size -= len(piece)
            parts.append(piece)
        return b"".join(parts)

    def skip(self, size: int) -> None:
        """Inflate past ``size`` bytes without keeping them."""
        while size > 0 and (self._pos < len(self._chunk) or self._more()):
            step = min(size, len(self._chunk) - self._pos)
            self._pos += step
            size -= step

    def _more(self) -> bool:
        """Inflate the next piece (at most _CHUNK bytes); False at the end of the stream."""
        while True:
            if time.monotonic() > self._ends:
                raise refused(self._url, f"took more than {self._seconds:.0f} s to inflate")
            if self._inflate.eof:  # (its unconsumed_tail may still hold what follows)
                source = self._inflate.unused_data or self._next()  # gzip allows members
                if not source:  # one after another
                    return False
                self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
            else:
                source = self._inflate.unconsumed_tail or self._next()
            # at most _CHUNK out per step; with no input left, what zlib still holds
            data = self._inflate.decompress(source, _CHUNK)
            self.total += len(data)
            if self.total > self._cap:
                raise refused(self._url, f"inflates to more than {self._cap:,} bytes")
            if data:
                self._chunk, self._pos = data, 0
                return True
            if not source:  # no input left, nothing more comes out, and the stream goes on
                raise refused(self._url, "ends before its gzip stream does (cut short?)")

    def _next(self) -> bytes:
        """The next _CHUNK compressed bytes or so (b"" at the end), joined from the pieces
        as they come (a download's are 16 KB), the wait for them not counted."""
        began = time.monotonic()
        pieces: list[bytes] = []
        held = 0
        while held < _CHUNK and not self._ended:
            got = next(self._body, None)
            self._ended = got is None
            if got:
                pieces.append(got)
                held += len(got)
        self._ends += time.monotonic() - began
        return b"".join(pieces)


def _pieces(body: bytes | Iterable[bytes]) -> Iterator[bytes]:
    if not isinstance(body, bytes):
        yield from body
        return
    view = memoryview(body)
    for at in range(0, len(body), _CHUNK):
        yield bytes(view[at : at + _CHUNK])


def tar_member(
    body: bytes | Iterable[bytes],
    url: str,
    wanted: Callable[[str], bool],
    *,
    max_wanted: int = MAX_MEMBER,
    max_member: int = MAX_MEMBER,
    max_members: int = MAX_MEMBERS,
    max_inflated: int = MAX_INFLATED,
    seconds: float = INFLATE_SECONDS,
) -> bytes | None:
    """The data of the first regular file of the ``.tar.gz`` ``body`` whose name ``wanted``
    accepts (at most ``max_wanted`` bytes), or None when it has none. WheelError when the
    archive is damaged or passes a cap (members, one member's size, bytes inflated, time)."""
    found = tar_members(
        body, url, wanted, count=1, max_wanted=max_wanted, max_member=max_member,
        max_members=max_members, max_inflated=max_inflated, seconds=seconds,
    )  # fmt: skip
    return next(iter(found.values()), None)


def tar_members(
    body: bytes | Iterable[bytes],
    url: str,
    wanted: Callable[[str], bool],
    *,
    count: int,
    max_wanted: int = MAX_MEMBER,
    max_member: int = MAX_MEMBER,
    max_members: int = MAX_MEMBERS,
    max_inflated: int = MAX_INFLATED,
    seconds: float = INFLATE_SECONDS,
) -> dict[str, bytes]:
    """The regular files of the ``.tar.gz`` ``body`` (its bytes, or its pieces as they come)
    whose names ``wanted`` accepts, by name, read until ``count`` are found or the archive
    ends (nothing after is read), within the same caps as :func:`tar_member` (WheelError
    past one)."""
    out: dict[str, bytes] = {}
    try:
        stream = _Inflated(_pieces(body), url, max_inflated, seconds)
        for number in range(1, max_members + 2):
            found = _next_member(stream, url)
            if found is None:
                return out  # the end-of-archive blocks
            name, kind, size = found
            if number > max_members:
                raise refused(url, f"has more than {max_members:,} members")
            if size > max_member:
                raise refused(url, f"has a member of {size:,} bytes (at most {max_member:,})")
            if kind in (b"0", b"\0", b"7") and wanted(name) and name not in out:
                if size > max_wanted:
                    raise refused(
                        url, f"has a {size:,}-byte {name[:200]!r} (at most {max_wanted:,})"
                    )
                data = stream.read(size)
                if len(data) < size:
                    raise refused(url, f"ends inside {name[:200]!r}")
                out[name] = data
                if len(out) >= count:
                    return out
                stream.skip(_padded(size) - size)
                continue
            stream.skip(_padded(size))
        raise AssertionError("unreachable: the loop ends by the member cap")
    except zlib.error as exc:
        raise refused(url, f"is not a gzip stream envkit can read ({exc})") from None


def _next_member(stream: _Inflated, url: str) -> tuple[str, bytes, int] | None:
    """The next member's name, type and size, its pax or GNU long-name headers read (they
    say the name, or the size past 8 GiB); None at the end of the archive."""
    extended: dict[str, str] = {}
    while True:
        header = stream.read(_BLOCK)
        if header == bytes(_BLOCK):
            return None
        if len(header) < _BLOCK:
            raise refused(url, "ends inside a member header")
        _checksum(header, url)
        kind, size = header[156:157], _size(header, url)
        if kind not in (b"x", b"g", b"L", b"K"):
            break
        if size > MAX_EXTENSION:
            raise refused(url, f"has a {size:,}-byte extended header")
        data = stream.read(_padded(size))[:size]
        if kind == b"x":
            extended.update(_pax(data))
        elif kind == b"L":
            extended["path"] = _text(data)
    if "size" in extended:
        if not extended["size"].isdigit():
            raise refused(url, "has a member header envkit cannot read")
        size = int(extended["size"])
    return extended.get("path") or _name(header), kind, size


def _padded(size: int) -> int:
    return -(-size // _BLOCK) * _BLOCK


def _size(header: bytes, url: str) -> int:
    field = header[124:136]
    if field[0] & 0x80:  # base-256, for sizes past the octal field
        return int.from_bytes(field[1:], "big")
    text = field.split(b"\0", 1)[0].strip()
    if not text:
        return 0
    try:
        return int(text, 8)
    except ValueError:
        raise refused(url, "has a member header envkit cannot read") from None


def _checksum(header: bytes, url: str) -> None:
    stored = header[148:156].split(b"\0", 1)[0].strip()
    computed = sum(header[:148]) + 8 * 32 + sum(header[156:])
    try:
        ok = int(stored, 8) == computed
    except ValueError:
        ok = False
    if not ok:
        raise refused(url, "is not a tar archive (a header's checksum is wrong)")


def _text(data: bytes) -> str:
    return data.split(b"\0", 1)[0].decode("utf-8", "replace")


def _name(header: bytes) -> str:
    name = _text(header[0:100])
    if header[257:263] == b"ustar\0":  # POSIX ustar: a prefix completes long names
        prefix = _text(header[345:500])
        return f"{prefix}/{name}" if prefix else name
    return name


def _pax(data: bytes) -> dict[str, str]:
    """The ``path`` and ``size`` records of a pax extended header."""
    at = 0
    found: dict[str, str] = {}
    while at < len(data):
        length_text, space, _rest = data[at : at + 20].partition(b" ")
        if not space or not length_text.isdigit() or int(length_text) <= 0:
            break
        record = data[at + len(length_text) + 1 : at + int(length_text)]
        at += int(length_text)
        key, equals, value = record.partition(b"=")
        if equals and key in (b"path", b"size"):
            found[key.decode()] = value.rstrip(b"\n").decode("utf-8", "replace")
    return found


def zip_directory(tail: bytes, size: int, url: str) -> tuple[int, int]:
    """The central directory's (start, length) in a zip of ``size`` bytes whose last bytes
    are ``tail``, checked against the caps before anything reads it. WheelError when it
    lists too many entries or is too large; (0, 0) when ``tail`` has no end record (zipfile
    then says what is wrong)."""
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        return 0, 0
    entries, length = struct.unpack("<HL", tail[at + 10 : at + 16])
    base = size - len(tail)  # where tail starts in the file
    end = base + at  # where the end record starts
    locator = at - 20
    if locator >= 0 and tail[locator : locator + 4] == b"PK\x06\x07":  # zip64, as zipfile reads
        (record,) = struct.unpack("<Q", tail[locator + 8 : locator + 16])
        rel = record - base
        if rel < 0 or rel + 56 > len(tail) or tail[rel : rel + 4] != b"PK\x06\x06":
            raise refused(url, "has a zip64 directory envkit cannot locate")
        entries, length = struct.unpack("<QQ", tail[rel + 32 : rel + 48])
        end = record
    if entries > MAX_ZIP_ENTRIES:
        raise refused(url, f"lists {entries:,} entries (at most {MAX_ZIP_ENTRIES:,})")
    if length > MAX_ZIP_DIRECTORY or length > end:
        raise refused(url, f"has a {length:,}-byte directory (at most {MAX_ZIP_DIRECTORY:,})")
    return end - length, length


def count_entries(directory: bytes, url: str) -> None:
    """Refuse a central directory holding more entries than :data:`MAX_ZIP_ENTRIES` (each
    starts with its signature, so the count bounds what zipfile will build)."""
    found = directory.count(b"PK\x01\x02")
    if found > MAX_ZIP_ENTRIES:
        raise refused(url, f"lists {found:,} entries (at most {MAX_ZIP_ENTRIES:,})")


def refused(url: str, what: str) -> WheelError:
    return WheelError(
        f"{redact(url)} {what}; envkit stopped reading it.",
        "The archive is not what a release publishes (an archive bomb?); report it to the "
        "index's owner, or use another index.",
    )
