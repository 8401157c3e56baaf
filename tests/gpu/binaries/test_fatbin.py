"""Reading ``.nv_fatbin`` sections by their layout: blobs built here as nvcc lays them out,
in g++-built shared objects, and damaged ones (one answer, bounded work)."""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.gpu.arch import Variant
from envkit.gpu.binaries import fatbin
from envkit.gpu.binaries.fatbin import Compression, Damaged, EntryKind, Fatbin

import elfbuild
import fatbins
from fatbins import ARCH, FAMILY, IR, LZ4, PTX, SASS, ZSTD, E


def parsed(blob: bytes) -> Fatbin:
    found = fatbin.parse(blob)
    assert isinstance(found, Fatbin), found
    return found


def test_containers_and_entries_as_nvcc_writes_them() -> None:
    """nvcc -gencode for sm_75, sm_80, compute_80, sm_90a, sm_100f and sm_120 writes one
    container per translation unit and one for the device link; both are read whole."""
    unit = fatbins.container(
        E(SASS, 75),
        E(PTX, 80, ZSTD, payload=b"// ptx" * 10, header_size=80),
        E(SASS, 80),
        E(SASS, 90, ARCH),
        E(SASS, 100, FAMILY, header_size=112),
        E(SASS, 120, LZ4, header_size=112),
    )
    link = fatbins.container(*fatbins.sass(75, 80))
    found = parsed(fatbins.section(link, unit, padding=b"\x94\x03" + bytes(14)))
    assert [len(c.entries) for c in found.containers] == [2, 6]
    assert found.containers[0].offset == 0 and found.containers[1].offset > 16
    entries = found.containers[1].entries
    assert [str(e.target) for e in entries] == [
        "sm_75", "compute_80", "sm_80", "sm_90a", "sm_100f", "sm_120",
    ]  # fmt: skip
    assert [e.kind for e in entries[:2]] == [EntryKind.SASS, EntryKind.PTX]
    assert [e.variant for e in entries[3:5]] == [Variant.ARCH, Variant.FAMILY]
    assert [e.compression for e in entries] == [
        Compression.NONE, Compression.ZSTD, Compression.NONE, Compression.NONE,
        Compression.NONE, Compression.LZ4,
    ]  # fmt: skip
    assert entries[1].header_size == 80 and entries[1].format_version == (9, 0)
    assert entries[0].format_version == (1, 8) and entries[1].uncompressed_size == 180


def test_ir_entries_and_unknown_kinds_are_kept_without_a_target() -> None:
    found = parsed(fatbins.container(E(IR, 80), E(7, 80), E(SASS, 86)))
    assert [e.kind for e in found.entries] == [EntryKind.IR, EntryKind.OTHER, EntryKind.SASS]
    assert [str(t) for t in found.containers[0].targets] == ["sm_86"]


def test_an_empty_section_and_empty_containers() -> None:
    assert parsed(b"").containers == ()
    assert parsed(fatbins.container()).containers[0].entries == ()


@pytest.mark.parametrize(
    ("blob", "reason"),
    [
        (bytes(64), "no fatbin container"),
        (fatbins.container(E(SASS, 80))[:40], "overruns the section"),
        (fatbins.container(E(SASS, 80), version=2), "version 2"),
        (struct.pack("<IHHQ", fatbins.MAGIC, 1, 8, 0), "header size 8"),
        (fatbins.container(E(SASS, 80, header_size=40)), "header size of 40"),
        (fatbins.container(E(SASS, 80, header_size=8192)), "header size of 8192"),
        (fatbins.container(E(SASS, 3)), "sm 3"),
        (struct.pack("<IHHQ", fatbins.MAGIC, 1, 16, 30) + bytes(30), "cut off"),
    ],
    ids=["no-magic", "truncated", "version", "small-header", "small-entry", "huge-entry",
         "bad-sm", "cut-entry"],
)  # fmt: skip
def test_a_damaged_section_is_one_answer_with_its_reason(blob: bytes, reason: str) -> None:
    found = fatbin.parse(blob)
    assert isinstance(found, Damaged) and reason in found.reason, found


def test_an_entry_that_claims_more_than_its_container_is_damaged() -> None:
    blob = bytearray(fatbins.container(E(SASS, 80), E(SASS, 90)))
    struct.pack_into("<Q", blob, 16 + 8, 10**9)  # the first entry's payload size
    found = fatbin.parse(bytes(blob))
    assert isinstance(found, Damaged) and found.offset == 16 and "overruns" in found.reason


def test_the_caps_end_the_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fatbin, "MAX_CONTAINERS", 40)
    monkeypatch.setattr(fatbin, "MAX_ENTRIES", 100)
    started = time.monotonic()
    found = fatbin.parse(fatbins.container() * 41)
    assert isinstance(found, Damaged) and "more than 40 fatbin containers" in found.reason
    found = fatbin.parse(fatbins.container(*fatbins.sass(*range(80, 90))) * 11)
    assert isinstance(found, Damaged) and "more than 100 fatbin entries" in found.reason
    assert time.monotonic() - started < 5


@settings(max_examples=examples(150), deadline=None)
@given(
    base=st.sampled_from(
        [
            fatbins.container(*fatbins.sass(70, 75, 80, 86, 89, 90)),
            fatbins.container(E(PTX, 80, ZSTD), E(SASS, 90, ARCH)),
        ]
    ),
    flips=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=8),
    cut=st.integers(0, 400),
)
def test_damaged_bytes_are_one_answer_in_bounded_work(
    base: bytes, flips: list[tuple[int, int]], cut: int
) -> None:
    """Whatever a section's bytes are, the answer is a Fatbin or a Damaged, at once."""
    blob = bytearray(base * 2)
    for at, value in flips:
        if at < len(blob):
            blob[at] = value
    found = fatbin.parse(bytes(blob[: len(blob) - cut % len(blob)]))
    assert isinstance(found, (Fatbin, Damaged))
    if isinstance(found, Fatbin):
        assert all(e.header_size >= 64 for e in found.entries)


@given(data=st.binary(max_size=600))
@settings(max_examples=examples(200), deadline=None)
def test_any_bytes_are_one_answer(data: bytes) -> None:
    assert isinstance(fatbin.parse(struct.pack("<I", fatbins.MAGIC) + data), (Fatbin, Damaged))


@elfbuild.needs_cxx
def test_the_section_of_a_shared_object(tmp_path: Path) -> None:
    built = elfbuild.built()
    blob = fatbins.section(fatbins.container(*fatbins.sass(80, 86)), fatbins.container(E(PTX, 80)))
    module = fatbins.with_fatbin(built.plain, blob, tmp_path / "_C.abi3.so")
    found = fatbin.read(module)
    assert isinstance(found, Fatbin) and found.size == len(blob)
    assert [str(e.target) for e in found.entries] == ["sm_80", "sm_86", "compute_80"]
    assert fatbin.read(built.plain) is None  # no GPU code at all
    damaged = fatbins.with_fatbin(built.plain, blob[:-8], tmp_path / "cut.so")
    assert isinstance(fatbin.read(damaged), Damaged)
    assert isinstance(fatbin.read(tmp_path / "missing.so"), Damaged)
    (tmp_path / "text.so").write_text("not an ELF file" * 10)
    assert "not an ELF file" in str(fatbin.read(tmp_path / "text.so"))


@elfbuild.needs_cxx
@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    flips=st.lists(st.tuples(st.integers(0, 2**31), st.integers(0, 255)), min_size=1, max_size=6)
)
def test_damaged_shared_objects_are_one_answer(
    tmp_path: Path, flips: list[tuple[int, int]]
) -> None:
    """A real shared object with a fatbin, bytes overwritten in its headers, its section
    table or anywhere: a Fatbin, a Damaged or None, never an exception."""
    good = tmp_path / "good.so"
    if not good.exists():
        fatbins.with_fatbin(elfbuild.built().plain, fatbins.container(*fatbins.sass(80)), good)
    data = bytearray(good.read_bytes())
    for at, value in flips:
        spots = (at % 64, len(data) - 1 - at % 2048, at % len(data))
        data[spots[at % 3]] = value
    (tmp_path / "bad.so").write_bytes(bytes(data))
    assert isinstance(fatbin.read(tmp_path / "bad.so"), (Fatbin, Damaged, type(None)))


@settings(max_examples=examples(60), deadline=None)
@given(gap=st.integers(0, 3 * fatbin.FIRST_LOOK), payload=st.integers(0, 40_000))
def test_containers_are_found_across_read_blocks_and_payloads_never_read(
    gap: int, payload: int
) -> None:
    """The next container's magic is searched for in blocks that overlap by three bytes, so
    one that straddles two blocks is found wherever bytes between containers put it; and
    an entry's payload is skipped, not read (a 40 kB one costs no more than none)."""
    first = fatbins.container(E(SASS, 80, payload=bytes(payload)))
    second = fatbins.container(E(PTX, 90))
    blob = first + bytes(gap) + second
    read: list[tuple[int, int]] = []

    def pread(at: int, length: int) -> bytes:
        read.append((at, length))
        return blob[at : at + length]

    found = fatbin.parse_read(pread, 0, len(blob))
    assert isinstance(found, Fatbin)
    assert [str(e.target) for e in found.entries] == ["sm_80", "compute_90"]
    assert found.containers[1].offset == len(first) + gap
    # the first search's block, the headers, and the search from each payload's end: as
    # many bytes whatever the payload's size
    assert sum(n for _, n in read) <= 3 * fatbin.FIRST_LOOK + 2 * gap + 400
