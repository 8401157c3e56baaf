"""The kernels a compiled module carries: its ``.nv_fatbin`` section, read by layout.

An ELF shared object built by nvcc keeps its GPU code in ``.nv_fatbin``: fatbin containers
laid end to end (one per translation unit, plus one per device link), each holding entries
of SASS (a cubin for one ``sm``) or PTX. The layout, little-endian, as nvcc 12.4 and 13.0
write it (read from objects compiled here and from vLLM 0.8.5/0.33.0 and torch 2.6.0 wheels):

container header, 16 bytes
    0  u32  magic 0xBA55ED50
    4  u16  version (1)
    6  u16  header size (16): the entries start there
    8  u64  payload size: the bytes of entries after the header

entry header, at least 64 bytes (72 with a name, 80-112 with an attribute block)
    0  u16  kind: 1 PTX, 2 ELF (SASS), 8 NVVM IR for link-time optimisation
    2  u16  (0x0101)
    4  u32  header size: the payload starts there
    8  u64  payload size (stored, padded)
   16  u32  compressed size (0 when stored plain)
   20  u32  offset of the attribute block in the header (0 without one)
   24  u16  minor, 26 u16 major: the payload's format version (ELF 1.7/1.8, PTX 8.4/9.0)
   28  u32  arch: major * 10 + minor (75, 90, 100, 120)
   32  u32  offset of the name in the header, 36 u32 its length (with -G)
   40  u64  flags: 0x1 64-bit, 0x2 debug, 0x10 Linux host, 0x2000 LZ4, 0x8000 Zstandard
            (CUDA 13's default), 0x100000 arch-specific (sm_90a), 0x200000 family (sm_100f)
   56  u64  uncompressed size (0 when stored plain)

Containers may be followed by bytes that are not one (nvcc's own objects end with 16 such
bytes); the next container is found by its magic. Every count, size and offset is checked
against the section and against the caps below: a section that does not hold together is
one :class:`Damaged` answer, never an exception and never unbounded work.
"""

from __future__ import annotations

import functools
import mmap
import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from envkit.gpu.arch import Capability, Kind, Target, Variant

MAGIC = 0xBA55ED50
SECTION = ".nv_fatbin"
CONTAINER_HEADER = 16
ENTRY_HEADER = 64  # the fixed part every entry header has
MAX_SECTION = 4 * 1024**3  # torch 2.6.0's libtorch_cuda.so: 790 MB of fatbin
MAX_CONTAINERS = 100_000  # libtorch_cuda.so: 341, vLLM 0.33.0's _C_stable_libtorch: 118
MAX_ENTRIES = 500_000  # libtorch_cuda.so: 2389 in all
MAX_ENTRY_HEADER = 4096  # seen: 64 to 120
FLAG_DEBUG = 0x2
FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000
FLAG_ARCH = 0x100000
FLAG_FAMILY = 0x200000


class EntryKind(str, Enum):
    PTX = "ptx"
    SASS = "sass"
    IR = "ir"  # NVVM IR kept for link-time optimisation: no kernel by itself
    OTHER = "other"


_KIND_OF = {1: EntryKind.PTX, 2: EntryKind.SASS, 8: EntryKind.IR}


class Compression(str, Enum):
    NONE = "none"
    LZ4 = "lz4"
    ZSTD = "zstd"
    UNKNOWN = "unknown"  # both flags set


@dataclass(frozen=True)
class Entry:
    """One entry's header: what it is, for which GPU, how it is stored."""

    kind: EntryKind
    sm: int  # 90 for sm_90a
    variant: Variant
    compression: Compression
    header_size: int
    size: int  # the payload as stored
    uncompressed_size: int  # 0 when stored plain
    format_version: tuple[int, int]  # (major, minor) of the ELF or PTX inside
    flags: int
    offset: int  # of the entry header, in the section

    @property
    def target(self) -> Target | None:
        """The compiled target (``sm_90a``, ``compute_80``); None for IR and unknown kinds."""
        if self.kind is EntryKind.SASS:
            return Target(Kind.SASS, Capability.from_sm(self.sm), self.variant)
        if self.kind is EntryKind.PTX:
            return Target(Kind.PTX, Capability.from_sm(self.sm), self.variant)
        return None


@dataclass(frozen=True)
class Container:
    """One fatbin container: its header and its entries in order."""

    offset: int  # in the section
    version: int
    header_size: int
    size: int  # payload bytes after the header
    entries: tuple[Entry, ...]

    @functools.cached_property  # asked twice per container by images(), once per entry
    def targets(self) -> frozenset[Target]:
        return frozenset(t for e in self.entries if (t := e.target) is not None)


@dataclass(frozen=True)
class Fatbin:
    """A parsed ``.nv_fatbin`` section."""

    size: int  # of the section
    containers: tuple[Container, ...]

    @property
    def entries(self) -> tuple[Entry, ...]:
        return tuple(e for c in self.containers for e in c.entries)


@dataclass(frozen=True)
class Damaged:
    """A section (or file) that cannot be read as fatbins; ``reason`` says what and where."""

    reason: str
    offset: int = 0  # in the section, where it went wrong

    def __str__(self) -> str:
        return self.reason


class _Broken(Exception):
    def __init__(self, reason: str, offset: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.offset = offset


Buffer = bytes | bytearray | mmap.mmap
Read = Callable[[int, int], bytes]  # (offset, length): the bytes there, fewer at the end
MAGIC_BYTES = struct.pack("<I", MAGIC)
FIRST_LOOK = 4096  # the bytes a search for the next magic reads first; doubled up to:
MAX_LOOK = 1024**2
_ENTRY = struct.Struct("<HHIQ4x4xHHI8xQ8xQ")  # kind, _, header size, size, minor, major, ...


def parse(data: Buffer, start: int = 0, end: int | None = None) -> Fatbin | Damaged:
    """The fatbin containers in ``data[start:end]`` (a section's bytes, or a whole mapped
    file with the section's bounds). Never raises; a section that does not hold together is
    :class:`Damaged`."""
    stop = len(data) if end is None else min(end, len(data))
    return parse_read(lambda at, length: bytes(data[at : at + length]), start, stop)


def parse_read(read: Read, start: int, stop: int) -> Fatbin | Damaged:
    """:func:`parse` of the bytes ``read`` gives for ``[start, stop)``: a file's section read
    header by header (``os.pread``), so that only the headers are read, never the payloads
    between them (a mapping touched as sparsely cost a page fault per header: 3,000 for the
    kernels of a vLLM 0.8.5 venv, a third of the GPU layer's time)."""
    if start < 0 or start > stop:
        return Damaged(f"the section's bounds ({start}, {stop}) are outside the data")
    try:
        return Fatbin(stop - start, tuple(_containers(read, start, stop)))
    except _Broken as broken:
        return Damaged(broken.reason, broken.offset)


def _find(read: Read, at: int, stop: int) -> int:
    """Where the next container magic starts in ``[at, stop)``, or -1; read in blocks that
    grow, each overlapping the last by three bytes (a magic across two blocks is found)."""
    look = FIRST_LOOK
    while stop - at >= len(MAGIC_BYTES):
        length = min(look, stop - at)
        block = read(at, length)
        hit = block.find(MAGIC_BYTES)
        if hit >= 0:
            return at + hit
        if len(block) < length:
            return -1
        at += length - (len(MAGIC_BYTES) - 1)
        look = min(look * 2, MAX_LOOK)
    return -1


def _containers(read: Read, start: int, stop: int) -> list[Container]:
    found: list[Container] = []
    entries = 0
    at = _find(read, start, stop)
    if at < 0 and stop > start:
        raise _Broken("no fatbin container in the section (no 0xBA55ED50 magic)", 0)
    while at >= 0:
        if len(found) >= MAX_CONTAINERS:
            raise _Broken(f"more than {MAX_CONTAINERS} fatbin containers", at - start)
        container = _container(read, at, start, stop)
        entries += len(container.entries)
        if entries > MAX_ENTRIES:
            raise _Broken(f"more than {MAX_ENTRIES} fatbin entries", at - start)
        found.append(container)
        # the payload is skipped, never searched: the next magic is after it
        at = _find(read, at + container.header_size + container.size, stop)
    return found


def _container(read: Read, at: int, start: int, stop: int) -> Container:
    where = at - start
    if at + CONTAINER_HEADER > stop:
        raise _Broken("a fatbin container header is cut off by the section's end", where)
    head = read(at, CONTAINER_HEADER)
    if len(head) < CONTAINER_HEADER:
        raise _Broken("a fatbin container header is cut off by the file's end", where)
    _magic, version, header_size, size = struct.unpack("<IHHQ", head)
    if version != 1:
        raise _Broken(f"fatbin container version {version} (envkit reads version 1)", where)
    if header_size < CONTAINER_HEADER or header_size > MAX_ENTRY_HEADER:
        raise _Broken(f"fatbin container header size {header_size}", where)
    first = at + header_size
    if size > stop - first:
        raise _Broken(
            f"a fatbin container of {size} bytes overruns the section by {size - (stop - first)}",
            where,
        )
    entries: list[Entry] = []
    cursor, last = first, first + size
    while cursor < last:
        if len(entries) >= MAX_ENTRIES:
            raise _Broken(f"more than {MAX_ENTRIES} entries in one container", where)
        entry = _entry(read, cursor, last, start)
        entries.append(entry)
        cursor += entry.header_size + entry.size  # header_size >= 64: always moves on
    return Container(where, version, header_size, size, tuple(entries))


def _entry(read: Read, at: int, last: int, start: int) -> Entry:
    where = at - start
    if at + ENTRY_HEADER > last:
        raise _Broken("a fatbin entry header is cut off by its container's end", where)
    head = read(at, ENTRY_HEADER)
    if len(head) < ENTRY_HEADER:
        raise _Broken("a fatbin entry header is cut off by the file's end", where)
    kind, _, header_size, size, fmt_minor, fmt_major, sm, flags, uncompressed = _ENTRY.unpack(head)
    if header_size < ENTRY_HEADER or header_size > MAX_ENTRY_HEADER:
        raise _Broken(f"a fatbin entry header size of {header_size}", where)
    if size > last - at - header_size:
        raise _Broken(f"a fatbin entry of {size} bytes overruns its container", where)
    entry_kind = _KIND_OF.get(kind, EntryKind.OTHER)
    if entry_kind in (EntryKind.SASS, EntryKind.PTX) and not 10 <= sm <= 999:
        raise _Broken(f"a fatbin entry for sm {sm}", where)
    return Entry(
        kind=entry_kind,
        sm=sm,
        variant=_variant(flags),
        compression=_compression(flags),
        header_size=header_size,
        size=size,
        uncompressed_size=uncompressed,
        format_version=(fmt_major, fmt_minor),
        flags=flags,
        offset=where,
    )


def _variant(flags: int) -> Variant:
    if flags & FLAG_ARCH:
        return Variant.ARCH
    return Variant.FAMILY if flags & FLAG_FAMILY else Variant.PLAIN


def _compression(flags: int) -> Compression:
    lz4, zstd = bool(flags & FLAG_LZ4), bool(flags & FLAG_ZSTD)
    if lz4 and zstd:
        return Compression.UNKNOWN
    return Compression.LZ4 if lz4 else Compression.ZSTD if zstd else Compression.NONE


def read(path: Path) -> Fatbin | Damaged | None:
    """The fatbins of the ELF file at ``path``; None when it has no ``.nv_fatbin`` section
    (no GPU code), :class:`Damaged` when the file or the section cannot be read. The section
    is mapped, not read: only the headers' pages are touched, whatever its size."""
    from envkit.gpu.binaries import elf  # pyelftools: only where ELF files are read

    try:
        with elf.Elf(path) as image:
            window = image.section(SECTION)
            if window is None:
                return None
            if window.size > MAX_SECTION:
                return Damaged(f"{SECTION} is {window.size} bytes (envkit reads {MAX_SECTION})")
            if window.nobits:
                return Damaged(f"{SECTION} has no bytes in the file (SHT_NOBITS)")
            return parse_read(image.read, window.offset, window.offset + window.size)
    except elf.DamagedElf as exc:
        return Damaged(str(exc))
