"""The bounded ELF reader under the GPU layer: real stubs read as nm reads them, and any
damage one answer (Unreadable) in bounded work, never an exception."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.gpu.binaries import dynsym, elf, elfheader
from envkit.gpu.binaries.filecache import FileCache

import elfbuild

pytestmark = elfbuild.needs_cxx


def test_a_stub_read_as_nm_reads_it() -> None:
    built = elfbuild.built()
    links = elf.links(built.ext_stable)
    assert isinstance(links, elf.Links) and links.soname == ""
    assert links.needed[:2] == ("libtorch_cpu.so", "libcudart.so.13")
    undefined = dynsym.undefined(built.ext_stable)
    assert isinstance(undefined, frozenset)
    assert set(elfbuild.STABLE_NAMES) | {"cudaGetDeviceCount"} <= undefined
    assert "init_stable" not in undefined  # defined there
    cudart = elf.links(built.cudart13)
    assert isinstance(cudart, elf.Links) and cudart.soname == "libcudart.so.13"
    names = frozenset([*elfbuild.STABLE_NAMES, "aoti_torch_nothing"])
    assert dynsym.defines(built.libtorch_cpu, names) == frozenset(elfbuild.STABLE_NAMES)
    wanted = frozenset([elfbuild.CHECK_FAIL])
    sysv, gnu = dynsym.defines(built.libc10_sysv, wanted), dynsym.defines(built.libc10, wanted)
    assert sysv == wanted == gnu
    assert dynsym.defines(built.ext_stable, frozenset(elfbuild.STABLE_NAMES)) == frozenset()


def test_files_that_are_not_elf_libraries(tmp_path: Path) -> None:
    (tmp_path / "empty.so").write_bytes(b"")
    (tmp_path / "text.so").write_text("#!/bin/sh\n" * 20)
    os.mkfifo(tmp_path / "fifo.so")
    for name, reason in [
        ("empty.so", "0 bytes"),
        ("text.so", "not an ELF file"),
        ("missing.so", "cannot be read"),
        ("fifo.so", "not a regular file"),
    ]:
        found = elf.links(tmp_path / name)
        assert isinstance(found, elf.Unreadable) and reason in found.reason, found
    cache = FileCache()
    assert cache.get(tmp_path / "text.so", elf.links) is cache.get(tmp_path / "text.so", elf.links)
    assert cache.reads == 1


@settings(
    max_examples=examples(80),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    flips=st.lists(st.tuples(st.integers(0, 2**31), st.integers(0, 255)), min_size=1, max_size=8),
    which=st.sampled_from(["libc10", "libc10_sysv", "libtorch_cpu", "ext_stable"]),
)
def test_damaged_libraries_are_one_answer(
    tmp_path: Path, flips: list[tuple[int, int]], which: str
) -> None:
    """Bytes overwritten in the ELF header, the section headers at the end, the dynamic
    tables or anywhere: each reader answers (a value or Unreadable), at once."""
    good: Path = getattr(elfbuild.built(), which)
    data = bytearray(good.read_bytes())
    for at, value in flips:
        spots = (at % 64, len(data) - 1 - at % 2048, 0x200 + at % 0x600, at % len(data))
        data[spots[at % 4]] = value
    bad = tmp_path / "bad.so"
    bad.write_bytes(bytes(data))
    names = frozenset([elfbuild.CHECK_FAIL, *elfbuild.STABLE_NAMES])
    assert isinstance(elf.links(bad), (elf.Links, elf.Unreadable))
    assert isinstance(dynsym.undefined(bad), (frozenset, elf.Unreadable))
    assert isinstance(dynsym.defines(bad, names), (frozenset, elf.Unreadable))


@settings(max_examples=examples(120), deadline=None)
@given(
    flips=st.lists(st.tuples(st.integers(0, 63), st.integers(0, 255)), max_size=6),
    which=st.sampled_from(["libc10", "ext_stable", "cudart13"]),
)
def test_the_header_is_read_as_pyelftools_reads_it(
    flips: list[tuple[int, int]], which: str
) -> None:
    """The ELF header, its layouts built once per kind of file: the same header as
    pyelftools' ELFFile gives for the same bytes (the ELF header overwritten anywhere: the
    class, the byte order, the type, the machine, the ABI), or the same error."""
    import io

    from elftools.elf.elffile import ELFFile

    data = bytearray(getattr(elfbuild.built(), which).read_bytes()[:4096])
    for at, value in flips:
        data[at] = value

    def read(reader: object) -> object:
        try:
            return reader(io.BytesIO(bytes(data)))  # type: ignore[operator]
        except (*elfheader.ERRORS, *elf.READ_ERRORS) as exc:
            return type(exc), str(exc)

    assert read(elfheader.header) == read(lambda s: ELFFile(s).header)


def test_the_step_cap_ends_long_lookups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(elf, "MAX_STEPS", 1)
    names = frozenset(elfbuild.STABLE_NAMES)
    found = dynsym.defines(elfbuild.built().libtorch_cpu, names)
    assert isinstance(found, elf.Unreadable) and "took over 1 steps" in found.reason


@settings(max_examples=examples(200), deadline=None)
@given(key=st.binary(max_size=2 * dynsym.HASHED_AT_ONCE + 3))
def test_the_gnu_hash_is_the_loaders(key: bytes) -> None:
    """The hash as a sum of products, in parts of HASHED_AT_ONCE bytes, is the dynamic
    loader's loop over the name's bytes, for names shorter and longer than one part."""
    h = 5381
    for byte in key:
        h = (h * 33 + byte) & 0xFFFFFFFF
    assert dynsym.gnu_hash(key) == h


def test_reads_stop_at_the_file_end(tmp_path: Path) -> None:
    """Elf.read gives what the file holds there, fewer bytes at its end, never past it."""
    built = elfbuild.built()
    with elf.Elf(built.libc10) as image:
        size = built.libc10.stat().st_size
        assert image.read(0, 4) == b"\x7fELF"
        assert image.read(size - 3, 10) == built.libc10.read_bytes()[-3:]
        assert image.read(size + 100, 10) == b""
        with pytest.raises(elf.DamagedElf):
            image.read(-1, 4)
