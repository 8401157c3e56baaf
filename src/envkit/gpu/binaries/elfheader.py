"""The ELF header, read and checked by pyelftools as its ``ELFFile`` reads it: the one part of
an ELF file envkit does not read by layout itself (:mod:`envkit.gpu.binaries.elf` reads the
section headers and the tables behind them). Imported only when a file is read: a look
answered from what an earlier run kept (:mod:`envkit.gpu.installed.remembered`) loads no
pyelftools."""

from __future__ import annotations

from typing import IO, Any

from elftools.common.exceptions import ELFError
from elftools.common.utils import struct_parse
from elftools.construct.core import ConstructError
from elftools.elf.structs import ELFStructs

ERRORS = (ELFError, ConstructError)  # what pyelftools raises on a header it cannot read

_LAYOUTS: dict[tuple[object, ...], ELFStructs] = {}  # pyelftools' struct layouts, per kind


def header(stream: IO[bytes]) -> Any:
    """The ELF header as pyelftools' ``ELFFile`` reads and checks it (EI_CLASS, EI_DATA, the
    header's layout, then the layouts its e_type, e_machine and EI_OSABI call for), each
    layout built once per kind of file rather than once per file: building them was most of
    the GPU layer's CPU time (418 files of a vLLM 0.8.5 venv, a handful of kinds). Raises
    what ``ELFFile`` raises, for the same bytes."""
    stream.seek(0)
    ident = stream.read(6)
    if ident[:4] != b"\x7fELF":
        raise ELFError("Magic number does not match")
    if ident[4:5] not in (b"\x01", b"\x02"):
        raise ELFError(f"Invalid EI_CLASS {ident[4:5]!r}")
    if ident[5:6] not in (b"\x01", b"\x02"):
        raise ELFError(f"Invalid EI_DATA {ident[5:6]!r}")
    little, elfclass = ident[5:6] == b"\x01", 32 if ident[4:5] == b"\x01" else 64
    basic = _LAYOUTS.get((little, elfclass))
    if basic is None:
        basic = ELFStructs(little_endian=little, elfclass=elfclass)
        basic.create_basic_structs()
        _LAYOUTS[(little, elfclass)] = basic
    header = struct_parse(basic.Elf_Ehdr, stream, stream_pos=0)
    osabi = header["e_ident"]["EI_OSABI"]
    kind: tuple[object, ...] = (little, elfclass, header["e_type"], header["e_machine"], osabi)
    if kind not in _LAYOUTS:  # built, as ELFFile builds them, for what they would raise
        advanced = ELFStructs(little_endian=little, elfclass=elfclass)
        advanced.create_basic_structs()
        advanced.create_advanced_structs(header["e_type"], header["e_machine"], osabi)
        _LAYOUTS[kind] = advanced
    return header
