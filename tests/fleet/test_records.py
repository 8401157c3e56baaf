"""A node's installed files against their RECORD (fleet.records): RECORD is read through
io.files, so one that is missing, huge, not a regular file, not text or not CSV is
``unrecorded`` (nothing to compare), never read whole, never a hang or a crash; by example and
by property, with importlib.metadata (the reader it replaced) as the oracle on good RECORDs."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import sys
import tempfile
from importlib import metadata
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.fleet.fingerprint import MAX_NAMES, Files
from envkit.fleet.records import MAX_RECORD_BYTES, check, entries, installed

FUZZ = settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def record(rows: list[tuple[str, str, str]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def distribution(site: Path, name: str, files: dict[str, bytes], version: str = "1.0") -> Path:
    """A dist-info as an installer leaves it: METADATA, the files, RECORD hashing them."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    rows = []
    for path, data in files.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_bytes(data)
        rows.append((path, digest(data), str(len(data))))
    rows.append((f"{info.name}/METADATA", "", ""))
    rows.append((f"{info.name}/RECORD", "", ""))
    (info / "RECORD").write_text(record(rows))
    return info


FILES = {"pkg/__init__.py": b"x = 1\n", "pkg/data.bin": bytes(range(256)), "../../bin/pkg": b"#!"}


def test_intact_then_edited_then_deleted_files(tmp_path: Path) -> None:
    site = tmp_path / "lib" / "python3.12" / "site-packages"
    info = distribution(site, "pkg", FILES)
    assert check(info) == (Files.INTACT, ())
    (site / "pkg" / "data.bin").write_bytes(b"edited")
    assert check(info) == (Files.MODIFIED, ("pkg/data.bin",))
    (site / "../../bin/pkg").unlink()  # a script RECORD lists outside the site-packages
    assert check(info) == (Files.MODIFIED, ("pkg/data.bin", "../../bin/pkg"))


def test_another_hash_mode_is_modified_and_the_names_shown_are_capped(tmp_path: Path) -> None:
    many = {f"pkg/m{i}.py": b"" for i in range(MAX_NAMES + 5)}
    info = distribution(tmp_path, "pkg", many)
    text = (info / "RECORD").read_text().replace("sha256=", "md5=", 1)
    (info / "RECORD").write_text(text)
    assert check(info) == (Files.MODIFIED, ("pkg/m0.py",))
    for path in many:
        (tmp_path / path).write_bytes(b"changed")
    state, modified = check(info)
    assert state is Files.MODIFIED and len(modified) == MAX_NAMES


def test_installed_finds_each_distribution_by_its_metadata_name(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    distribution(first, "Foo_Bar", {"foo/__init__.py": b"1"})
    distribution(second, "foo-bar", {"foo2/__init__.py": b"2"}, "2.0")
    (second / "foo2" / "__init__.py").write_bytes(b"edited")  # only the first is imported
    distribution(second, "other", {"other.py": b""})
    (second / "other-1.0.dist-info" / "RECORD").unlink()
    versions = {"foo-bar": "1.0", "other": "1.0", "absent": "3.0"}
    found = {d.name: d for d in installed([str(first), str(second)], versions, hashes=True)}
    assert found["foo-bar"].files is Files.INTACT
    assert found["other"].files is Files.UNRECORDED  # no RECORD
    assert found["absent"].files is Files.UNRECORDED  # not installed at all
    unchecked = list(installed([str(first)], versions, hashes=False))
    assert {d.files for d in unchecked} == {Files.UNCHECKED}


def _bad_record(info: Path, kind: str) -> None:
    target = info / "RECORD"
    target.unlink()
    if kind == "missing":
        return
    if kind == "huge":  # sparse: over the cap by a byte, refused by its size before a read
        with target.open("wb") as handle:
            handle.truncate(MAX_RECORD_BYTES + 1)
    elif kind == "fifo":
        os.mkfifo(target)  # refused at once, never waited on
    elif kind == "endless":
        target.symlink_to("/dev/zero")
    elif kind == "folder":
        target.mkdir()
    elif kind == "binary":
        target.write_bytes(b"pkg/__init__.py,\xff\xfe" + digest(b"x = 1\n").encode() + b",6\n")
    elif kind == "no hashes":
        target.write_text("pkg/__init__.py,,\npkg/data.bin,,\n")
    elif kind == "field too long":  # longer than a CSV field may be
        target.write_text('"' + "p" * 200_000 + '",sha256=x,1\n')


@pytest.mark.parametrize(
    "kind",
    ["missing", "huge", "fifo", "endless", "folder", "binary", "no hashes", "field too long"],
)
def test_a_bad_record_is_unrecorded_never_read_whole(tmp_path: Path, kind: str) -> None:
    info = distribution(tmp_path, "pkg", FILES)
    _bad_record(info, kind)
    assert check(info) == (Files.UNRECORDED, ())
    found = list(installed([str(tmp_path)], {"pkg": "1.0"}, hashes=True))
    assert [d.files for d in found] == [Files.UNRECORDED]


def test_the_records_of_envkits_own_venv_are_intact() -> None:
    """Real RECORDs, as uv wrote them into the venv running the tests."""
    site = next(Path(p) for p in sys.path if p.endswith("site-packages") and Path(p).is_dir())
    versions = {"packaging": metadata.version("packaging"), "click": metadata.version("click")}
    found = {d.name: d.files for d in installed([str(site)], versions, hashes=True)}
    assert found == {"packaging": Files.INTACT, "click": Files.INTACT}


# RECORD paths: any printable text without a line break (commas and quotes included: CSV
# quotes them), the hash any mode or none
paths = st.text(
    st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")) | st.sampled_from(',"'),
    min_size=1,
    max_size=30,
).filter(lambda p: p.strip() != "")
hashes = st.one_of(
    st.just(""), st.sampled_from(["sha256=", "md5=", "sha256"]).map(lambda m: m + "a")
)
rows = st.lists(st.tuples(paths, hashes, st.sampled_from(["", "12"])), max_size=12)


class _Listed(metadata.PathDistribution):
    """importlib.metadata's reading of every RECORD row. From Python 3.12 on, ``files`` leaves
    out the rows whose file is not on disk (none of these generated rows' files is): each is
    located at a path that exists, so every row is read, as 3.10 and 3.11 read them."""

    def locate_file(self, path: str | os.PathLike[str]) -> Path:
        return Path(os.curdir)


@FUZZ
@given(rows)
def test_good_records_read_as_importlib_metadata_reads_them(
    found: list[tuple[str, str, str]],
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        info = Path(folder) / "pkg-1.0.dist-info"
        info.mkdir()
        (info / "RECORD").write_text(record(found), encoding="utf-8")
        mine = [(str(PurePosixPath(p)), *h.partition("=")[::2]) for p, h in entries(info) or ()]
        files = _Listed(info).files or []
        theirs = [(str(f), *((f.hash.mode, f.hash.value) if f.hash else ("", ""))) for f in files]
        assert mine == theirs


@FUZZ
@given(st.binary(max_size=400), st.sampled_from(["", "pkg/__init__.py,"]))
def test_any_record_bytes_are_a_state_never_a_crash(data: bytes, start: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        info = distribution(Path(folder), "pkg", FILES)
        (info / "RECORD").write_bytes(start.encode() + data)
        state, modified = check(info)
        assert state in (Files.INTACT, Files.MODIFIED, Files.UNRECORDED)
        assert len(modified) <= MAX_NAMES and (state is Files.MODIFIED) == bool(modified)


@FUZZ
@given(
    st.dictionaries(
        # r"pkg/[a-z]{1,8}\.py", built from its part (drawing from the regex cost more)
        st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8).map("pkg/{}.py".format),
        st.binary(max_size=64),
        min_size=1,
    ),
    st.data(),
)
def test_a_changed_file_is_the_one_named(files: dict[str, bytes], data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as folder:
        site = Path(folder)
        info = distribution(site, "pkg", files)
        assert check(info) == (Files.INTACT, ())
        changed = data.draw(st.sampled_from(sorted(files)))
        (site / changed).write_bytes(files[changed] + b"!")
        assert check(info) == (Files.MODIFIED, (changed,))
