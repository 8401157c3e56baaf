"""Fatbin blobs built by the layout envkit.gpu.binaries.fatbin documents (the one nvcc 12.4 and 13.0
write), and shared objects that carry them: a g++-built library given a ``.nv_fatbin``
section with ``objcopy --add-section``, as nvcc's own objects have it."""

from __future__ import annotations

import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

MAGIC = 0xBA55ED50
PTX, SASS, IR = 1, 2, 8
BASE_FLAGS = 0x11  # 64-bit, Linux host
ARCH, FAMILY, LZ4, ZSTD = 0x100000, 0x200000, 0x2000, 0x8000
OBJCOPY = shutil.which("objcopy")


@dataclass(frozen=True)
class E:
    """One entry to write: ``E(SASS, 90, ARCH)`` is sm_90a."""

    kind: int
    sm: int
    flags: int = 0
    payload: bytes = b"\x7fELF" + bytes(60)
    header_size: int = 64  # nvcc: 64, 72 with a name, 80-112 with an attribute block


def entry(e: E) -> bytes:
    extra = bytes(max(e.header_size - 64, 0))  # a header_size below 64 is written as a lie
    compressed = len(e.payload) if e.flags & (LZ4 | ZSTD) else 0
    header = struct.pack(
        "<HHIQIIHHIIIQQQ",
        e.kind,
        0x0101,
        e.header_size,
        len(e.payload),
        compressed,
        64 if extra else 0,
        8 if e.kind == SASS else 0,  # format version minor: ELF 1.8, PTX 9.0
        1 if e.kind == SASS else 9,
        e.sm,
        0,
        0,
        BASE_FLAGS | e.flags,
        0,
        len(e.payload) * 3 if compressed else 0,
    )
    return header + extra + e.payload


def container(*entries: E, version: int = 1) -> bytes:
    body = b"".join(entry(e) for e in entries)
    return struct.pack("<IHHQ", MAGIC, version, 16, len(body)) + body


def section(*containers: bytes, padding: bytes = b"") -> bytes:
    """Containers end to end, ``padding`` after each (nvcc leaves bytes after the last)."""
    return b"".join(c + padding for c in containers)


def sass(*sms: int, flags: int = 0) -> tuple[E, ...]:
    return tuple(E(SASS, sm, flags) for sm in sms)


def with_fatbin(library: Path, blob: bytes, out: Path) -> Path:
    """A copy of ``library`` with ``blob`` as its ``.nv_fatbin`` section."""
    assert OBJCOPY is not None
    out.parent.mkdir(parents=True, exist_ok=True)
    data = out.with_suffix(".fatbin")
    data.write_bytes(blob)
    subprocess.run(
        [
            OBJCOPY,
            "--add-section",
            f".nv_fatbin={data}",
            str(library),
            str(out),
        ],
        check=True,
    )
    data.unlink()
    return out
