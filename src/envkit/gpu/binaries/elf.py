"""The parts of an ELF shared object the GPU layer reads, every one of them bounded.

pyelftools reads and checks the ELF header; the section headers and the tables behind them
(``.dynamic`` and its strings here; ``.dynsym``, ``.gnu.hash`` and ``.hash`` in
:mod:`envkit.gpu.binaries.dynsym`) are read by their layout, so that each count, offset and
chain is checked against the file and a cap (pyelftools' section objects parse a hash table
whole on sight, and its lookups follow a chain that loops forever). Headers and small tables
are read with ``os.pread``; hash lookups, which jump across megabytes, go through a
read-only mapping. A table that does not hold together (a hash chain that loops, a string
without its end, a symbol index past the table) raises :class:`DamagedElf` with the reason:
the callers turn it into one "damaged library" answer in bounded time. Checked against
``nm -D`` on 92 libraries of a vLLM 0.33.0 environment: the same undefined symbols, the same
definitions found.
"""

from __future__ import annotations

import io
import mmap
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

from envkit.wording import counted

MAX_SECTIONS = 4096  # real shared objects have about 40
MAX_NEEDED = 512
MAX_NAME = 65_536  # the longest mangled torch symbol is about 3,000 characters
MAX_STEPS = 10_000_000  # hash-chain steps one file's lookups may take in all
DYNAMIC_BLOCK = 4096  # bytes of .dynamic read at a time
SHN_XINDEX = 0xFFFF
SHT_NOBITS = 8
DT_NEEDED, DT_SONAME = 1, 14
# what the layouts raise on bytes that are not the ELF they claim to be (pyelftools' own
# errors, for the header, are elfheader.ERRORS)
READ_ERRORS = (
    struct.error, ValueError, KeyError, IndexError, TypeError, AttributeError, AssertionError,
    OverflowError, UnicodeError,
)  # fmt: skip


class DamagedElf(Exception):
    """An ELF file that cannot be read, or whose tables do not hold together."""


@dataclass(frozen=True)
class Window:
    """Where a section's bytes are in the file."""

    offset: int
    size: int
    entsize: int
    link: int
    nobits: bool


class Elf:
    """One ELF file, mapped read-only; use as a context manager. Raises DamagedElf."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = -1
        self._map: mmap.mmap | None = None
        self.size = 0
        # (offset, size, entsize, link, nobits) of each section; a Window made when asked
        self._sections: list[tuple[int, int, int, int, bool]] = []
        self._names: dict[bytes, int] = {}
        self.steps = 0
        try:
            # non-blocking: a FIFO named like a library must not wait for a writer
            self._fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            facts = os.fstat(self._fd)
            if not stat.S_ISREG(facts.st_mode):
                raise DamagedElf(f"{path.name} is not a regular file")
            self.size = size = facts.st_size
            if size < 64:
                raise DamagedElf(f"{path.name} is {counted(size, 'byte')}: not an ELF file")
            self._read_headers(size)
        except OSError as exc:
            self.close()
            raise DamagedElf(f"{path.name} cannot be read: {exc.strerror or exc}") from exc
        except READ_ERRORS as exc:
            self.close()
            raise DamagedElf(f"{path.name} is not a readable ELF file: {why(exc)}") from exc
        except DamagedElf:
            self.close()
            raise

    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` (fewer at the file's end), read with ``os.pread``:
        the headers and small tables are read so, a few hundred bytes each, rather than
        touched in a mapping (each page a mapping touches first is a page fault, several
        times a small read's cost on the machines measured). Raises DamagedElf."""
        if offset < 0 or length < 0:
            raise DamagedElf(f"{self.path.name}: a read at {offset} of {length} bytes")
        try:
            return os.pread(self._fd, min(length, max(self.size - offset, 0)), offset)
        except OSError as exc:
            raise DamagedElf(f"{self.path.name} cannot be read: {exc.strerror or exc}") from exc

    @property
    def data(self) -> mmap.mmap:
        """The whole file, mapped read-only when first asked for (the dynamic symbol tables
        and their hash tables, read or looked up across megabytes)."""
        if self._map is None:
            try:
                self._map = mmap.mmap(self._fd, 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError) as exc:
                raise DamagedElf(f"{self.path.name} cannot be mapped: {exc}") from exc
        return self._map

    def _read_headers(self, size: int) -> None:
        """pyelftools reads and checks the ELF header; the section headers are then read by
        their layout, one struct each (pyelftools' own section objects parse hash tables
        whole, whatever counts they claim)."""
        from envkit.gpu.binaries import elfheader  # pyelftools: only when a file is read

        head = self.read(0, 64)
        if head[:4] != b"\x7fELF":
            raise DamagedElf(f"{self.path.name} is not an ELF file")
        try:
            header = elfheader.header(io.BytesIO(head))
        except elfheader.ERRORS as exc:
            raise DamagedElf(f"{self.path.name} is not a readable ELF file: {why(exc)}") from exc
        self.is64 = header["e_ident"]["EI_CLASS"] == "ELFCLASS64"
        self.little = header["e_ident"]["EI_DATA"] == "ELFDATA2LSB"
        offset, entsize = int(header["e_shoff"]), int(header["e_shentsize"])
        count, names_at = int(header["e_shnum"]), int(header["e_shstrndx"])
        if offset == 0:
            return
        # sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, sh_info, ...
        form = ("<" if self.little else ">") + ("IIQQQQIIQQ" if self.is64 else "IIIIIIIIII")
        if entsize != struct.calcsize(form):
            raise DamagedElf(f"{self.path.name}: section headers of {entsize} bytes")
        if offset > size - entsize:
            raise DamagedElf(f"{self.path.name}: the section headers lie past the file's end")
        if count == 0 or names_at == SHN_XINDEX:  # the counts overflowed into section 0
            first = struct.unpack(form, self.read(offset, entsize))
            count = count or int(first[5])
            names_at = int(first[6]) if names_at == SHN_XINDEX else names_at
        if count > MAX_SECTIONS or offset + count * entsize > size:
            raise DamagedElf(f"{self.path.name}: {count} section headers do not fit the file")
        table = self.read(offset, count * entsize)
        names_of: list[int] = []
        for name, kind, _, _, start, length, link, _, _, item in struct.iter_unpack(form, table):
            nobits = kind == SHT_NOBITS
            if not nobits and (start > size or length > size - start):
                raise DamagedElf(f"{self.path.name}: a section lies past the file's end")
            self._sections.append((start, length, item, link, nobits))
            names_of.append(name)
        if 0 < names_at < count:  # else no section names: nothing is found by name
            self._read_names(names_of, names_at)

    def _read_names(self, names_of: list[int], names_at: int) -> None:
        """The sections' names, as bytes, each checked as :meth:`string` checks it (a Window
        and a decoded name for each of some 40 sections per file were a fifth of the GPU
        layer's time)."""
        start, length = self._sections[names_at][:2]
        strings = self.read(start, length)
        for index, name in enumerate(names_of):
            self._names.setdefault(strings[name : self.name_end(strings, 0, name, length)], index)

    def __enter__(self) -> Elf:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def section(self, name: str) -> Window | None:
        index = self._names.get(name.encode("utf-8", "replace"))
        return None if index is None else Window(*self._sections[index])

    def linked(self, window: Window) -> Window:
        """The section ``window`` links to (its string table)."""
        if not 0 < window.link < len(self._sections):
            raise DamagedElf(f"{self.path.name}: a section links to section {window.link}")
        return Window(*self._sections[window.link])

    def word(self, at: int) -> int:
        """The 32-bit word at ``at``, in the file's byte order."""
        return int(struct.unpack_from("<I" if self.little else ">I", self.data, at)[0])

    def name_end(self, blob: bytes | mmap.mmap, at: int, index: int, size: int) -> int:
        """Where the NUL ending name ``index`` of a string table of ``size`` bytes, which
        starts at ``at`` in ``blob``, is (looking no further than the table and MAX_NAME);
        DamagedElf when the index is past the table or the name has no end in it."""
        if index >= size:
            raise DamagedElf(f"{self.path.name}: a name past the end of its string table")
        start = at + index
        end = blob.find(b"\0", start, min(start + MAX_NAME, at + size))
        if end < 0:
            raise DamagedElf(f"{self.path.name}: a name without its end in the string table")
        return end

    def string(self, table: Window, index: int) -> str:
        """The NUL-terminated string at ``index`` of a string table."""
        start = table.offset + index
        end = self.name_end(self.data, table.offset, index, table.size)
        return self.data[start:end].decode("utf-8", "replace")

    def _read_string(self, table: Window, index: int) -> str:
        """:meth:`string`, read with :meth:`read` (one of a table's few names wanted): the
        first 256 bytes, and up to MAX_NAME only for a name longer than that."""
        limit = min(MAX_NAME, max(table.size - index, 0))
        block = self.read(table.offset + index, min(256, limit))
        if b"\0" not in block and len(block) < limit:
            block = self.read(table.offset + index, limit)
        return block[: self.name_end(block, -index, index, table.size)].decode("utf-8", "replace")

    def needed(self) -> tuple[tuple[str, ...], str]:
        """(the DT_NEEDED libraries in order, the DT_SONAME or '')."""
        dynamic = self.section(".dynamic")
        if dynamic is None or dynamic.nobits:
            return (), ""
        strings = self.linked(dynamic)
        form = ("<" if self.little else ">") + ("qQ" if self.is64 else "iI")
        step = struct.calcsize(form)
        needed: list[str] = []
        soname = ""
        at, stop = dynamic.offset, dynamic.offset + dynamic.size - dynamic.size % step
        while at < stop:  # read a block at a time: a real .dynamic is under 1 KB
            block = self.read(at, min(DYNAMIC_BLOCK, stop - at))
            for tag, value in struct.iter_unpack(form, block):
                if tag == 0:
                    return tuple(needed), soname
                if tag == DT_NEEDED:
                    if len(needed) >= MAX_NEEDED:
                        raise DamagedElf(f"{self.path.name} needs more than {MAX_NEEDED} libraries")
                    needed.append(self._read_string(strings, value))
                elif tag == DT_SONAME:
                    soname = self._read_string(strings, value)
            at += len(block)
        return tuple(needed), soname

    def step(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise DamagedElf(f"{self.path.name}: symbol lookups took over {MAX_STEPS} steps")


@dataclass(frozen=True)
class Unreadable:
    """A file that could not be read as the ELF it claims to be; ``reason`` says why."""

    reason: str

    def __str__(self) -> str:
        return self.reason


@dataclass(frozen=True)
class Links:
    """What a shared object says of its links: the libraries it needs and its own soname."""

    needed: tuple[str, ...]
    soname: str


def links(path: Path) -> Links | Unreadable:
    """The NEEDED entries and the SONAME of ``path``; never raises."""
    try:
        with Elf(path) as image:
            return Links(*image.needed())
    except DamagedElf as exc:
        return Unreadable(str(exc))
    except READ_ERRORS as exc:
        return Unreadable(f"{path.name}: {why(exc)}")


def why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:200]
