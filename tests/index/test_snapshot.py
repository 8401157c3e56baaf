"""Knowledge snapshots as files: written and read back whole, their age said, and every
way a snapshot can be changed, malformed or oversized refused before any of it is used."""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.version import Version
from properties import examples

from envkit.errors import BadSnapshot, KnowledgeMissing
from envkit.index import snapshot
from envkit.index.pages import WheelFile
from envkit.index.session import IndexSession
from envkit.io import cache

SHA = "ab" * 32
WHEEL = WheelFile(
    "vllm-0.8.5-py3-none-any.whl",
    "http://user:pw@127.0.0.1:9/files/vllm-0.8.5-py3-none-any.whl",
    1234,
    Version("0.8.5"),
    "2025-04-28T23:59:40Z",
    ">=3.9",
    SHA,
)
SDIST = WheelFile(
    "vllm-0.8.5.tar.gz", "http://127.0.0.1:9/f/v.tar.gz", None, Version("0.8.5"), None, None
)
ENTRY = "compat/vllm-0.8.5-transformers-4.51.3.abc.v4.json"
WHEN = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.timezone.utc)


def _write(path: Path, **more: object) -> snapshot.Snapshot:
    return snapshot.write(
        path,
        index="http://user:pw@127.0.0.1:9/simple/",
        made_for=["p"],
        pages={"vllm": snapshot.Listing((WHEEL,), (SDIST,))},
        entries={ENTRY: '{"findings": []}'},
        now=WHEN,
        **more,
    )


def test_a_snapshot_reads_back_whole_without_credentials(tmp_path: Path) -> None:
    snap = _write(tmp_path / "k.zip")
    again = snapshot.read(tmp_path / "k.zip")
    assert again == snap
    assert snap.index == "http://127.0.0.1:9/simple"  # the credentials never written
    assert b"pw" not in (tmp_path / "k.zip").read_bytes()
    (wheel,) = snap.listing("vllm").wheels
    assert wheel.filename == WHEEL.filename and wheel.sha256 == SHA and wheel.size == 1234
    assert wheel.upload_time == WHEEL.upload_time and wheel.requires_python == ">=3.9"
    assert snap.listing("vllm").sdists[0].version == Version("0.8.5")
    assert snap.entries == {ENTRY: '{"findings": []}'} and snap.made_for == ("p",)
    assert snap.created == WHEN and len(snap.digest) == 64


def test_its_age_is_said_in_days() -> None:
    assert snapshot.age_line(WHEN, WHEN + dt.timedelta(hours=3)) == (
        "knowledge from 2026-11-30, made today"
    )
    assert snapshot.age_line(WHEN, dt.datetime(2026, 12, 2, tzinfo=dt.timezone.utc)) == (
        "knowledge from 2026-11-30, 2 days old"
    )
    assert "1 day old" in snapshot.age_line(WHEN, dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc))


def test_in_use_the_session_lists_from_it_and_sends_nothing(tmp_path: Path) -> None:
    snap = _write(tmp_path / "k.zip")
    snapshot.use(snap)
    try:
        session = IndexSession("http://127.0.0.1:9/other")
        assert session.index == snap.index  # the snapshot's index: its cache keys
        assert session.releases("vllm") == [Version("0.8.5")]
        assert list(session.sdists("vllm")) == [Version("0.8.5")]
        with pytest.raises(KnowledgeMissing, match=r"torch's files.*knowledge export"):
            session.files("torch")
        with pytest.raises(KnowledgeMissing, match=r"vllm-0\.8\.5-py3-none-any\.whl"):
            session.http.get_range(WHEEL.url, 0, 10)
        assert cache.entry_text(ENTRY) == '{"findings": []}'  # the cache answers from it
    finally:
        snapshot.use(None)
    assert cache.entry_text(ENTRY) is None


def _rewrite(path: Path, change: Callable[[dict[str, bytes]], object]) -> None:
    with zipfile.ZipFile(path) as archive:
        members = {i.filename: archive.read(i) for i in archive.infolist()}
    change(members)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    path.write_bytes(buffer.getvalue())


def _manifest(members: dict[str, bytes], edit: Callable[[dict[str, object]], None]) -> None:
    """Change the manifest and write its digest again (a consistent forgery of one field)."""
    doc = json.loads(members["manifest.json"])
    edit(doc)
    members["manifest.json"] = json.dumps(doc).encode()
    members["manifest.sha256"] = hashlib.sha256(members["manifest.json"]).hexdigest().encode()


def _entries(doc: dict[str, object]) -> list[dict[str, object]]:
    found = doc["entries"]
    assert isinstance(found, list)
    return found


TAMPERING: dict[str, tuple[Callable[[dict[str, bytes]], object], str]] = {
    "an entry changed": (
        lambda m: m.update({f"cache/{ENTRY}": b'{"findings": ["x"]}'}),
        "its sha256 differs",
    ),
    "a page changed": (
        lambda m: m.update({"pages/vllm.json": m["pages/vllm.json"].replace(b"0.8.5", b"0.9.9")}),
        "its sha256 differs",
    ),
    "the manifest changed": (
        lambda m: m.update(
            {"manifest.json": m["manifest.json"].replace(b"127.0.0.1", b"10.0.0.1")}
        ),
        "does not match its digest",
    ),
    "the digest gone": (lambda m: m.pop("manifest.sha256"), "does not match its digest"),
    "the manifest gone": (lambda m: m.pop("manifest.json"), "has no manifest.json"),
    "another format": (
        lambda m: _manifest(m, lambda d: d.update(format=99)),
        "is of format 99; this envkit reads format 1",
    ),
    "another kind": (
        lambda m: _manifest(m, lambda d: d.update(kind="other")),
        "is not a knowledge snapshot",
    ),
    "a member added": (
        lambda m: m.update({"cache/scans/extra.v2.json": b"{}"}),
        "which its manifest does not list",
    ),
    "a member removed": (lambda m: m.pop(f"cache/{ENTRY}"), "which it does not hold"),
    "a path out of the snapshot": (
        lambda m: m.update({"../../etc/cron.d/x": b"x"}),
        "a member envkit does not write",
    ),
    "an absolute path": (lambda m: m.update({"/etc/passwd": b"x"}), "does not write"),
    "an entry of no kind envkit keeps": (
        lambda m: _manifest_entry(m, "cache/nothing/x.json"),
        "does not write",
    ),
    "a size that lies": (
        lambda m: _manifest(m, lambda d: _entries(d)[0].update(bytes=1)),
        "of another size",
    ),
}


def _manifest_entry(members: dict[str, bytes], name: str) -> None:
    members[name] = b"{}"

    def add(doc: dict[str, object]) -> None:
        _entries(doc).append(
            {"name": name, "sha256": hashlib.sha256(b"{}").hexdigest(), "bytes": 2}
        )

    _manifest(members, add)


@pytest.mark.parametrize("case", sorted(TAMPERING))
def test_a_changed_snapshot_is_refused(tmp_path: Path, case: str) -> None:
    path = tmp_path / "k.zip"
    _write(path)
    change, said = TAMPERING[case]
    _rewrite(path, change)
    with pytest.raises(BadSnapshot, match="did not use it") as caught:
        snapshot.read(path)
    assert said in caught.value.message
    assert caught.value.exit_code == 2


def test_a_member_that_inflates_past_its_cap_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "k.zip"
    _write(path)
    bomb = b"\0" * (snapshot.MAX_MEMBER + 1)  # 16 MiB of zeros: 16 KB packed
    _rewrite(path, lambda m: m.update({"cache/scans/bomb.v2.json": bomb}))
    assert path.stat().st_size < 100_000
    with pytest.raises(BadSnapshot, match="over 16 MiB"):
        snapshot.read(path)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"", "is not a readable zip"),
        (b"PK\x03\x04 not really", "is not a readable zip"),
        (b"{}", "is not a readable zip"),
    ],
)
def test_what_is_not_a_snapshot_is_refused(tmp_path: Path, content: bytes, said: str) -> None:
    path = tmp_path / "k.zip"
    path.write_bytes(content)
    with pytest.raises(BadSnapshot, match=said):
        snapshot.read(path)
    with pytest.raises(BadSnapshot, match=r"missing|does not exist|No such"):
        snapshot.read(tmp_path / "nowhere.zip")


@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    members=st.dictionaries(
        st.sampled_from(["manifest.json", "manifest.sha256", "pages/vllm.json", f"cache/{ENTRY}"]),
        st.one_of(st.binary(max_size=200), st.sampled_from([b"{}", b"[]", b'{"format": 1}'])),
    ),
    edit=st.sampled_from(["kind", "format", "index", "created", "entries", "made_for"]),
    value=st.one_of(
        st.none(), st.integers(), st.text(max_size=30), st.lists(st.integers(), max_size=3)
    ),
)
def test_any_members_are_read_or_refused(
    tmp_path: Path, members: dict[str, bytes], edit: str, value: object
) -> None:
    path = tmp_path / "any.zip"
    for change in (
        lambda m: m.update(members),
        lambda m: _manifest(m, lambda d: d.update({edit: value})),
    ):
        _write(path)
        _rewrite(path, change)
        try:
            snapshot.read(path)
        except BadSnapshot as exc:
            assert "did not use it" in exc.message
