"""The GPU layer's answers kept between runs: a second look at the same files reads none of
them and answers the same; a file written again (even at its old size, its modification
time set back), replaced, or changed too recently is read again; an entry that does not
hold together, or was made by other reading code, is read anew, never an error."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from properties import examples
from sites import FLASH, site_template

from envkit.gpu.arch import Capability
from envkit.gpu.binaries import filecache
from envkit.gpu.installed import modules, remembered
from envkit.gpu.installed.assess import GpuReport, assess
from envkit.gpu.target import GpuTarget
from envkit.io.cache import GPU_FILES

import elfbuild
import fatbins
from fatbins import SASS, E

pytestmark = elfbuild.needs_cxx
CORE = "vllm/_C.abi3.so"


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A copy of the test site whose files count as settled at once (they were just made),
    and a cache folder of its own."""
    monkeypatch.setattr(filecache, "SETTLED_NS", -(10**15))
    monkeypatch.setattr(filecache, "FINE_SETTLED_NS", -(10**15))
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    site = tmp_path / "site-packages"
    shutil.copytree(site_template(), site, symlinks=True)
    return site


def same(report: GpuReport) -> GpuReport:
    """The report without what differs between a look that reads and one that recalls."""
    return dataclasses.replace(report, files_read=0, files_remembered=0, seconds=0.0)


def entry(site: Path) -> Path:
    return GPU_FILES.path(remembered._key(site))


def rewrite_keeping_times(path: Path, data: bytes) -> None:
    """Write ``data`` over ``path`` in place, then set its times back: only its change
    time (and, for a new size, its size) says it changed."""
    before = path.stat()
    path.write_bytes(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_a_second_look_reads_nothing_and_answers_the_same(
    settled: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    target = GpuTarget(Capability(8, 6))
    first = assess(settled, target)
    assert first.files_read > 0 and first.files_remembered == 0 and entry(settled).is_file()
    second = assess(settled, target)
    assert second.files_read == 0 and second.files_remembered > 0
    assert same(second) == same(first)
    # the findings are made each run, for the GPU asked about, from the answers kept
    blackwell = GpuTarget(Capability(12, 0))
    warm = assess(settled, blackwell)
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "another-cache"))
    cold = assess(settled, blackwell)
    assert warm.files_read == 0 and cold.files_remembered == 0 and same(warm) == same(cold)
    assert "no-kernel-image" in [f.code for f in warm.findings if f.subject == CORE]


def test_a_file_written_again_at_its_size_with_its_old_times_is_read_again(
    settled: Path,
) -> None:
    """vLLM's _C given kernels for sm_80 alone instead of sm_70..sm_90: the same number of
    bytes, its modification time put back; its change time says it changed, and on a 7.5
    card its kernels are now missing."""
    module = settled / CORE
    turing = GpuTarget(Capability(7, 5))
    assess(settled, turing)
    assert CORE not in [f.subject for f in assess(settled, turing).findings]  # remembered
    data = module.read_bytes()
    old = fatbins.container(*fatbins.sass(70, 75, 80, 86, 89, 90))
    new = fatbins.container(*[E(SASS, 80)] * 6)
    assert len(old) == len(new) and old in data
    rewrite_keeping_times(module, data.replace(old, new))
    again = assess(settled, turing)
    assert again.files_read >= 1
    assert [f.code for f in again.findings if f.subject == CORE] == ["no-kernel-image"]


def test_a_replaced_file_and_a_new_torch_library_are_read_again(settled: Path) -> None:
    first = assess(settled)
    assert first.linkage is not None and first.linkage.links
    # a torch/lib library replaced by one that defines nothing vLLM's modules need
    lib = settled / "torch" / "lib" / "libc10.so"
    replacement = settled / "torch" / "lib" / "libc10.so.new"
    shutil.copy(elfbuild.built().plain, replacement)
    replacement.replace(lib)
    again = assess(settled)
    assert again.files_read >= 1 and again.linkage is not None and not again.linkage.links


def test_files_changed_too_recently_are_not_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A site whose files were all written a moment ago: nothing is kept, so a write within
    the file system's clock tick cannot hide behind an answer."""
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    site = tmp_path / "site-packages"
    shutil.copytree(site_template(), site, symlinks=True)
    first = assess(site)
    assert not entry(site).exists()
    second = assess(site)
    assert second.files_remembered == 0 and second.files_read == first.files_read


def test_an_entry_by_other_reading_code_is_not_used(
    settled: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = assess(settled)
    monkeypatch.setattr(remembered, "code", lambda: "another envkit")
    again = assess(settled)
    assert again.files_remembered == 0 and again.files_read == first.files_read


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    spots=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=6),
    swap=st.sampled_from([None, 0, -1, "x", [], {}, [1, 2, 3], {"needed": [7]}, 2**70, [[]]]),
)
def test_any_entry_is_used_whole_or_read_anew(
    settled: Path, spots: list[tuple[int, int]], swap: object
) -> None:
    """A value that is not what the entry holds put in place of a file's stamp or one of
    its answers: the look answers as one that read every file. Bytes overwritten anywhere:
    an answer, never an error (an entry is input: a well-formed one that lies is what
    anyone who can write envkit's cache folder can make, as for every cache entry)."""
    path = entry(settled)
    path.unlink(missing_ok=True)  # an example before may have left a well-formed lie there
    truth = same(assess(settled))
    text = path.read_text()
    data = json.loads(text)
    files = sorted(data["files"])
    chosen = data["files"][files[spots[0][0] % len(files)]]
    field = sorted(chosen)[spots[0][1] % len(chosen)]
    chosen[field] = swap
    path.write_text(json.dumps(data))
    assert same(assess(settled)) == truth
    raw = bytearray(text.encode())
    for at, value in spots:
        raw[at % len(raw)] = value
    path.write_bytes(bytes(raw))
    assert isinstance(assess(settled), GpuReport)


def test_the_linkage_is_kept_for_the_modules_packages_too(settled: Path) -> None:
    """A top-level module whose RECORD now says another distribution owns it: the file is
    the same, its package is not, so the linkage kept for the old one is not used."""
    cache = remembered.file_cache(settled, None)
    before = remembered.linkage_inputs(settled, modules.extension_modules(settled, cache), cache)
    old = settled / "flash_attn-2.8.3.dist-info"
    new = settled / "flashpack-1.0.dist-info"
    new.mkdir()
    (new / "RECORD").write_text(f"{FLASH},,\n")
    (old / "RECORD").write_text("flash_attn/__init__.py,,\n")
    walk = modules.extension_modules(settled, cache)
    assert {m.package for m in walk.modules if m.path.name == FLASH} == {"flashpack"}
    assert before and remembered.linkage_inputs(settled, walk, cache) not in ("", before)


def test_only_files_with_a_change_time_long_enough_ago_are_kept() -> None:
    cache = filecache.FileCache()
    now = time.time_ns()
    hour = 3600 * 10**9
    assert cache.settled((1, 2, 3, now - hour, now - hour))
    assert not cache.settled((1, 2, 3, now - hour, now))  # just changed
    assert not cache.settled((1, 2, 3, now - hour, 0))  # a file system with no change time
    assert not cache.settled((1, 2, 3, now + hour, now - hour))  # modified in the future


def test_what_was_kept_follows_a_venv_moved_whole(settled: Path, tmp_path: Path) -> None:
    """envkit build verifies a venv where it is made, then swaps it into place: the entry,
    which names files inside site-packages, moves with it, and the files' own stamps still
    decide whether it holds."""
    first = assess(settled)
    moved = tmp_path / "swapped" / "site-packages"
    moved.parent.mkdir()
    settled.rename(moved)
    remembered.moved(settled, moved)
    assert not entry(settled).exists() and entry(moved).is_file()
    again = assess(moved)
    assert again.files_read == 0 and again.files_remembered > 0
    assert dataclasses.replace(same(again), site_packages="") == dataclasses.replace(
        same(first), site_packages=""
    )
    remembered.moved(settled, moved)  # nothing kept there any more: nothing happens
    assert entry(moved).is_file()


def test_times_with_a_fraction_of_a_second_settle_sooner() -> None:
    cache = filecache.FileCache()
    now = time.time_ns()
    fine = now - 2 * 10**9 + 123_456  # two seconds ago, on a clock with nanoseconds
    coarse = (now // 10**9 - 2) * 10**9  # two seconds ago, whole seconds (FAT's clock)
    assert cache.settled((1, 2, 3, fine, fine))
    assert not cache.settled((1, 2, 3, coarse, coarse))
