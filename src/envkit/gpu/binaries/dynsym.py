"""The dynamic symbols of an ELF shared object, as the dynamic loader sees them: which it
needs others to define (:func:`undefined`) and which of some names it defines
(:func:`defines`), looked up through its ``.gnu.hash`` or ``.hash`` table. Every count,
index and chain is checked against the file and a cap (:mod:`envkit.gpu.binaries.elf`
says why the tables are read here by layout): a table that does not hold together is one
:class:`~envkit.gpu.binaries.elf.Unreadable` answer in bounded time.
"""

from __future__ import annotations

import functools
import operator
import struct
from collections.abc import Callable, Iterable
from pathlib import Path

from envkit.gpu.binaries.elf import (
    READ_ERRORS,
    DamagedElf,
    Elf,
    Unreadable,
    Window,
    why,
)

MAX_SYMBOLS = 2_000_000  # torch 2.6.0's libtorch_cpu.so: 146,000 dynamic symbols
SHN_UNDEF = 0
STB_WEAK = 2
HASHED_AT_ONCE = 512  # bytes of a name hashed per sum (names run to elf.MAX_NAME)


def undefined(path: Path) -> frozenset[str] | Unreadable:
    """The strong undefined dynamic symbols of ``path``: what others must define for it to
    load; never raises."""
    try:
        with Elf(path) as image:
            return _undefined(image)
    except DamagedElf as exc:
        return Unreadable(str(exc))
    except READ_ERRORS as exc:
        return Unreadable(f"{path.name}: {why(exc)}")


def defines(path: Path, names: frozenset[str]) -> frozenset[str] | Unreadable:
    """Which of ``names`` the library at ``path`` defines; never raises."""
    try:
        with Elf(path) as image:
            return frozenset(_defines(image, names))
    except DamagedElf as exc:
        return Unreadable(str(exc))
    except READ_ERRORS as exc:
        return Unreadable(f"{path.name}: {why(exc)}")


def _table(image: Elf) -> tuple[Window, Window, int]:
    table = image.section(".dynsym")
    if table is None or table.nobits:
        raise DamagedElf(f"{image.path.name} has no dynamic symbol table")
    size = 24 if image.is64 else 16
    if table.entsize not in (0, size):
        raise DamagedElf(f"{image.path.name}: dynamic symbols of {table.entsize} bytes")
    count = table.size // size
    if count > MAX_SYMBOLS:
        raise DamagedElf(f"{image.path.name} has more than {MAX_SYMBOLS} dynamic symbols")
    return table, image.linked(table), count


def _symbol(image: Elf, table: Window, index: int) -> tuple[int, int, int]:
    """(name offset, binding, section index) of dynamic symbol ``index``."""
    end = "<" if image.little else ">"
    if image.is64:
        name, info, _, shndx = struct.unpack_from(
            end + "IBBH", image.data, table.offset + 24 * index
        )
    else:
        name, _, _, info, _, shndx = struct.unpack_from(
            end + "IIIBBH", image.data, table.offset + 16 * index
        )
    return name, info >> 4, shndx


def _undefined(image: Elf) -> frozenset[str]:
    """The names of the strong undefined dynamic symbols: what the file needs others to
    define (weak ones may stay undefined)."""
    if image.section(".dynsym") is None:
        return frozenset()
    table, strings, count = _table(image)
    end = "<" if image.little else ">"
    size = 24 if image.is64 else 16
    raw = image.read(table.offset, count * size)
    # the names of a module's undefined symbols are most of its string table: read whole
    names = image.read(strings.offset, strings.size)
    found = set()
    if image.is64:
        rows = struct.iter_unpack(end + "IBBHQQ", raw)
        wanted = [n for n, i, _, x, _, _ in rows if x == SHN_UNDEF and n and i >> 4 != STB_WEAK]
    else:
        rows = struct.iter_unpack(end + "IIIBBH", raw)
        wanted = [n for n, _, _, i, _, x in rows if x == SHN_UNDEF and n and i >> 4 != STB_WEAK]
    for name in wanted:
        stop = image.name_end(names, 0, name, strings.size)
        found.add(names[name:stop].decode("utf-8", "replace"))
    return frozenset(found)


def _defines(image: Elf, names: Iterable[str]) -> set[str]:
    """Which of ``names`` this library defines, through its hash table as the dynamic
    loader looks them up (``.gnu.hash``, else ``.hash``, else every symbol)."""
    wanted = set(names)
    if not wanted or image.section(".dynsym") is None:
        return set()
    table, strings, count = _table(image)
    gnu, sysv = image.section(".gnu.hash"), image.section(".hash")
    if gnu is not None and not gnu.nobits:
        lookup = _GnuHash(image, gnu, count).find
    elif sysv is not None and not sysv.nobits:
        lookup = _SysvHash(image, sysv, count).find
    else:
        every: dict[str, int] = {}
        for index in range(1, count):
            at, _, shndx = _symbol(image, table, index)
            every[image.string(strings, at)] = shndx
        return {n for n in wanted if every.get(n, SHN_UNDEF) != SHN_UNDEF}
    found: set[str] = set()
    for name in wanted:
        hit = lookup(name, lambda i: image.string(strings, _symbol(image, table, i)[0]))
        if hit is not None and _symbol(image, table, hit)[2] != SHN_UNDEF:
            found.add(name)
    return found


@functools.cache
def _powers() -> tuple[int, ...]:
    """33 ** i modulo 2 ** 32, for i below HASHED_AT_ONCE."""
    return tuple(pow(33, i, 2**32) for i in range(HASHED_AT_ONCE))


def gnu_hash(key: bytes) -> int:
    """The GNU hash of a symbol's name (``h = h * 33 + byte`` from 5381, modulo 2 ** 32),
    as a sum of products in C rather than a loop in Python over the name's bytes: a
    mangled torch name is about 80 bytes, and vLLM's modules look up some 1,800 of them.

    >>> gnu_hash(b""), gnu_hash(b"printf")
    (5381, 359345080)
    """
    powers = _powers()
    h = 5381
    for at in range(0, len(key), HASHED_AT_ONCE):
        part = key[at : at + HASHED_AT_ONCE]
        weights = reversed(powers[: len(part)])
        h = h * powers[len(part) - 1] * 33 + sum(map(operator.mul, part, weights))
        h &= 0xFFFFFFFF
    return h


class _GnuHash:
    def __init__(self, image: Elf, window: Window, count: int) -> None:
        self.image, self.count = image, count
        if window.size < 16:
            raise DamagedElf(f"{image.path.name}: .gnu.hash is cut off")
        word = image.word
        at = window.offset
        self.nbuckets, self.symoffset, self.bloom_size, self.shift = (
            word(at + 4 * i) for i in range(4)
        )
        self.bloom_word = 8 if image.is64 else 4
        self.bloom = at + 16
        self.buckets = self.bloom + self.bloom_size * self.bloom_word
        self.chains = self.buckets + 4 * self.nbuckets
        self.end = window.offset + window.size
        # the chains are checked as they are walked: linkers (and patchelf) leave out the
        # ones no bucket reaches (torch 2.14's libtorch_global_deps.so has none at all)
        if (
            self.nbuckets == 0
            or self.bloom_size == 0
            or self.symoffset > count
            or self.chains > self.end
        ):
            raise DamagedElf(f"{image.path.name}: .gnu.hash does not fit its section")

    def find(self, name: str, name_at: Callable[[int], str]) -> int | None:
        image = self.image
        h = gnu_hash(name.encode("utf-8", "replace"))
        bits = self.bloom_word * 8
        form = ("<" if image.little else ">") + ("Q" if image.is64 else "I")
        word_at = self.bloom + self.bloom_word * ((h // bits) % self.bloom_size)
        (mask,) = struct.unpack_from(form, image.data, word_at)
        if not (mask >> (h % bits)) & (mask >> ((h >> self.shift) % bits)) & 1:
            return None
        index = image.word(self.buckets + 4 * (h % self.nbuckets))
        if index == 0:
            return None
        if index < self.symoffset:
            raise DamagedElf(f"{image.path.name}: a .gnu.hash bucket before its symbols")
        while index < self.count:
            image.step()
            at = self.chains + 4 * (index - self.symoffset)
            if at + 4 > self.end:
                raise DamagedElf(f"{image.path.name}: a .gnu.hash chain runs past its section")
            chained = image.word(at)
            if (chained | 1) == (h | 1) and name_at(index) == name:
                return index
            if chained & 1:
                return None
            index += 1
        raise DamagedElf(f"{image.path.name}: a .gnu.hash chain runs past the symbol table")


class _SysvHash:
    def __init__(self, image: Elf, window: Window, count: int) -> None:
        self.image = image
        if window.size < 8:
            raise DamagedElf(f"{image.path.name}: .hash is cut off")
        self.nbuckets, self.nchains = image.word(window.offset), image.word(window.offset + 4)
        self.buckets = window.offset + 8
        self.chains = self.buckets + 4 * self.nbuckets
        if (
            self.nbuckets == 0
            or self.nchains > count
            or self.chains + 4 * self.nchains > window.offset + window.size
        ):
            raise DamagedElf(f"{image.path.name}: .hash does not fit its section")

    def find(self, name: str, name_at: Callable[[int], str]) -> int | None:
        image = self.image
        h = 0
        for byte in name.encode("utf-8", "replace"):
            h = (h << 4) + byte
            high = h & 0xF0000000
            if high:
                h ^= high >> 24
            h &= ~high & 0xFFFFFFFF
        index = image.word(self.buckets + 4 * (h % self.nbuckets))
        for _ in range(self.nchains + 1):
            if index == 0:
                return None
            if index >= self.nchains:
                raise DamagedElf(f"{image.path.name}: a .hash chain leaves the symbol table")
            image.step()
            if name_at(index) == name:
                return index
            index = image.word(self.chains + 4 * index)
        raise DamagedElf(f"{image.path.name}: a .hash chain loops")
