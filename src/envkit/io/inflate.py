"""An HTTP answer's ``Content-Encoding`` undone as its bytes come, within a byte cap.

httpx inflates each chunk whole, and each layer of a stacked encoding (``gzip, gzip``) in
turn: 2 KB of gzip of gzip inflate to more than a gigabyte before a caller can count a
byte. Here every layer is inflated in pieces of at most :data:`PIECE` bytes, the next layer
taking each piece as it comes, and every layer's output counts against the same cap as the
body: a bomb of any depth ends in :class:`Inflated` with memory bounded by a few pieces.

Known encodings: ``gzip`` (``x-gzip``; concatenated members too), ``deflate`` (zlib, or
raw deflate as some servers send it), ``identity``; at most :data:`MAX_LAYERS` of them.
Anything else (``br``, ``zstd``: envkit does not ask for them) is :class:`Undecodable`.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator

PIECE = 64 * 1024
MAX_LAYERS = 4
ACCEPTED = "gzip, deflate"  # what envkit's requests ask for (Accept-Encoding)
_GZIP = zlib.MAX_WBITS | 16
_ZLIB = zlib.MAX_WBITS
_RAW = -zlib.MAX_WBITS
_HEAD = 1024 * 1024


class Undecodable(ValueError):
    """The answer names an encoding envkit does not decode, too many, or is not what its
    encoding says."""


class Inflated(ValueError):
    """A layer inflated past the cap."""


def layers(header: str) -> list[str]:
    """The encodings of a ``Content-Encoding`` value, in the order they were applied."""
    names = [part.strip().lower() for part in header.split(",")]
    return [name for name in names if name and name != "identity"]


def decoded(raw: Iterable[bytes], header: str, limit: int) -> Iterator[bytes]:
    """The body ``raw`` (as sent) with the encodings ``header`` names undone, in pieces;
    Inflated once any layer has made more than ``limit`` bytes, Undecodable for an
    encoding that is unknown, one layer too many, or bytes that do not decode."""
    names = layers(header)
    if len(names) > MAX_LAYERS:
        raise Undecodable(f"{len(names)} stacked encodings ({header[:80]!r})")
    for name in names:
        if name not in ("gzip", "x-gzip", "deflate"):
            raise Undecodable(f"the encoding {name[:40]!r}, which envkit does not decode")
    stream: Iterable[bytes] = raw
    for name in reversed(names):  # the last applied is undone first
        stream = _inflate(stream, name, limit)
    return iter(stream)


def _inflate(chunks: Iterable[bytes], name: str, limit: int) -> Iterator[bytes]:
    layer = _Layer(name, limit)
    for chunk in chunks:
        yield from layer.feed(chunk)


class _Layer:
    """One encoding undone, in pieces of at most PIECE bytes, ``limit`` bytes in all."""

    def __init__(self, name: str, limit: int) -> None:
        self.name, self.limit, self.made = name, limit, 0
        self.wbits = _ZLIB if name == "deflate" else _GZIP
        self.inflater = zlib.decompressobj(self.wbits)
        self.started = False  # some output came: a deflate answer is zlib or raw by then
        # the input before that, all of it while ``whole``: read again as raw deflate
        self.head, self.whole = b"", self.wbits == _ZLIB

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self.whole and not self.started:  # (a zlib header is wrong in its first 2 bytes)
            self.whole = len(self.head) + len(data) <= _HEAD
            self.head = self.head + data if self.whole else b""
        while data:
            if self.inflater.eof:
                if self.wbits != _GZIP:
                    return  # bytes after a deflate stream's end: ignored, as httpx does
                self.inflater = zlib.decompressobj(self.wbits)  # a gzip file's next member
            try:
                out = self.inflater.decompress(data, PIECE)
            except zlib.error as exc:
                if self.whole and not self.started and self.wbits == _ZLIB:
                    self.wbits, data = _RAW, self.head  # raw deflate, without zlib's header
                    self.inflater = zlib.decompressobj(_RAW)
                    continue
                raise Undecodable(f"a body that is not valid {self.name} ({exc})") from None
            yield from self._out(out)
            # input held back because the piece was full, else what follows a member's end
            data = self.inflater.unused_data if self.inflater.eof else self.inflater.unconsumed_tail
            while not data and len(out) == PIECE and not self.inflater.eof:
                out = self.inflater.decompress(b"", PIECE)  # pending for input already taken
                yield from self._out(out)

    def _out(self, out: bytes) -> Iterator[bytes]:
        self.started = self.started or bool(out)
        self.made += len(out)
        if self.made > self.limit:
            raise Inflated(self.name)
        if out:
            yield out
