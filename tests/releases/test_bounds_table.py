"""envkit's shipped table of vLLM's test-registry bounds (releases/boundstable): generated
from sdists served on loopback through the real reader, preferred for the index it was read
from, ignored for another, refused whole when damaged; and (network) equal to a fresh read
of two real releases' sdists."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import layouts
import pytest
from packaging.version import Version

from envkit.errors import UnreadableFile
from envkit.io.urls import DEFAULT_INDEX, index_key, index_url
from envkit.profiles.bounds import Bound, parse_policy, parse_registry
from envkit.releases import boundstable, boundsupdate
from envkit.releases.boundstable import Release
from envkit.releases.registry import Scanner
from envkit.releases.testregistry import read_sdist, transformers_bounds

import indexserver
from helpers import envkit
from wheelhouse import Wheel

REGISTRY = """
_EXAMPLES = {
    "NimbusForCausalLM": _HfExamplesInfo(
        "tiny-org/nimbus", min_transformers_version="4.60", extras={"x": "y"}
    ),
    "StratusForVision": _HfExamplesInfo(
        "tiny-org/stratus",
        max_transformers_version="4.49",
        transformers_version_reason={"hf": "the reference runner's code is older"},
    ),
    "CirrusModel": _HfExamplesInfo("tiny-org/cirrus"),
}
"""
INIT = """
def test_can_initialize(model_arch):
    model_info.check_transformers_version(
        on_fail="skip", check_max_version=False, check_version_reason="vllm"
    )
"""
OTHER = """
ENTRIES = {"NimbusForCausalLM": _HfExamplesInfo("tiny-org/nimbus", min_transformers_version="9.0")}
"""


def _release(version: str, files: dict[str, str]) -> Wheel:
    return Wheel("vllm", version, {"vllm/__init__.py": ""}, sdist=True, sdist_files=files)


def _serve(folder: Path, wheels: list[Wheel]) -> Iterator[indexserver.Server]:
    folder.mkdir()
    for wheel in wheels:
        wheel.write(folder)
    with indexserver.serve(folder) as server:
        yield server


@pytest.fixture
def first(tmp_path: Path) -> Iterator[indexserver.Server]:
    registry = {"tests/models/registry.py": REGISTRY, "tests/models/test_initialization.py": INIT}
    wheels = [
        _release("0.17.1", registry),
        _release("0.3.0", {"README.md": "no tests here"}),
        Wheel("vllm", "0.4.0", {"vllm/__init__.py": ""}),  # a wheel, no sdist
    ]
    yield from _serve(tmp_path / "first", wheels)


@pytest.fixture
def other(tmp_path: Path) -> Iterator[indexserver.Server]:
    yield from _serve(tmp_path / "other", [_release("0.17.1", {"tests/models/registry.py": OTHER})])


@pytest.fixture
def shipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the table envkit reads is, for the test (written by it)."""
    path = tmp_path / "transformers-bounds.json"
    monkeypatch.setattr(boundstable, "shipped_path", lambda: str(path))
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    return path


def _sdists_fetched(server: indexserver.Server) -> list[str]:
    return [p for p in server.paths if p.endswith(".tar.gz")]


def test_an_entry_equals_what_the_reader_gives(
    first: indexserver.Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "table.json"
    url = indexserver.url(first)
    assert boundsupdate.main(["--out", str(out), "--index-url", url]) == 0
    table = boundstable.load(out.read_text())
    assert table.index == index_key(url)
    assert sorted(table.releases) == [Version("0.3.0"), Version("0.4.0"), Version("0.17.1")]
    entry = table.releases[Version("0.17.1")]
    expected = parse_registry(REGISTRY, policy=parse_policy(INIT))
    assert (entry.sdist, entry.registry, dict(entry.bounds)) == (
        "vllm-0.17.1.tar.gz",
        True,
        expected,
    )
    assert set(expected) == {"NimbusForCausalLM", "StratusForVision"}
    assert expected["StratusForVision"].hf_only == ("max",)  # the release's init policy kept
    fresh = Scanner(url, use_cache=False)  # the reader history uses, on its own
    assert transformers_bounds(fresh, Version("0.17.1")) == expected
    old = table.releases[Version("0.3.0")]
    assert (old.registry, dict(old.bounds)) == (False, {})
    assert '"bounds": "no test registry"' in out.read_text()
    none = table.releases[Version("0.4.0")]
    assert (none.sdist, none.registry, dict(none.bounds)) == ("", False, {})
    assert '"sdist": "", "bounds": "no source distribution"' in out.read_text()
    assert boundstable.load(boundstable.dumps(table)) == table
    # nothing new: nothing but the file list read, nothing written
    before, fetched = out.read_bytes(), len(_sdists_fetched(first))
    assert boundsupdate.main(["--out", str(out), "--index-url", url]) == 0
    assert out.read_bytes() == before and len(_sdists_fetched(first)) == fetched


def test_the_table_is_preferred_for_its_index_and_ignored_for_another(
    first: indexserver.Server, other: indexserver.Server, shipped: Path
) -> None:
    url = indexserver.url(first)
    table, read = boundsupdate.update(Scanner(url, use_cache=False), None)
    assert read == 3
    # the table says what no sdist on the index says: its answer is the one given
    marked = table.releases[Version("0.17.1")]
    bound = marked.bounds["NimbusForCausalLM"]
    changed = {
        **marked.bounds,
        "NimbusForCausalLM": Bound(architecture=bound.architecture, minimum="4.61"),
    }
    releases = {
        **table.releases,
        Version("0.17.1"): Release("0.17.1", marked.sdist, True, changed),
    }
    shipped.write_text(boundstable.dumps(dataclasses.replace(table, releases=releases)))
    fetched = len(_sdists_fetched(first))
    for use_cache in (True, False):  # --no-cache too, as with the kernel table
        scanner = Scanner(url, use_cache=use_cache)
        assert transformers_bounds(scanner, Version("0.17.1")) == changed
        assert transformers_bounds(scanner, Version("0.3.0")) == {}
        assert transformers_bounds(scanner, Version("0.4.0")) == {}
    assert len(_sdists_fetched(first)) == fetched  # no sdist read
    # another index: the table is not its word; the sdist is read
    found = transformers_bounds(Scanner(indexserver.url(other)), Version("0.17.1"))
    assert found == parse_registry(OTHER)
    assert len(_sdists_fetched(other)) == 1


def test_the_shipped_table_holds_every_release_for_the_default_index() -> None:
    table = boundstable.shipped()
    assert table is not None and table.index == index_key(DEFAULT_INDEX)
    assert table.release(DEFAULT_INDEX + "/", Version("0.8.5")) is not None
    assert table.release("http://127.0.0.1:1/simple", Version("0.8.5")) is None
    assert len(table.releases) >= 100 and table.generated
    assert table.releases[Version("0.15.0")].sdist == ""  # the index lists a wheel, no sdist
    new = table.releases[Version("0.33.0")]
    assert new.registry and new.sdist == "vllm-0.33.0.tar.gz" and len(new.bounds) > 10
    assert not table.releases[Version("0.1.0")].registry


def _damaged(text: str) -> list[str]:
    good = json.loads(text)
    entry = {"version": "0.17.1", "sdist": "vllm-0.17.1.tar.gz", "bounds": {}}
    bounded = {**entry, "bounds": {"A": {"min": "4.6"}}}
    cases: list[object] = [
        {**good, "releases": {"0.17.1": entry}},
        {**good, "releases": [entry, entry]},
        {**good, "releases": [{**bounded, "bounds": {"A": {"min": "four point six"}}}]},
        {**good, "releases": [{**bounded, "bounds": {"A": {"max": 4.6}}}]},
        {**good, "releases": [{**entry, "bounds": "none"}]},
        {**good, "releases": [{**entry, "bounds": ["A"]}]},
        {**good, "releases": [{**entry, "sdist": "../vllm.tar.gz"}]},
        {**good, "releases": [{**entry, "version": "0.17.01"}]},
        {**good, "releases": [{**entry, "sdist": ""}]},
        {**good, "releases": [{**entry, "bounds": "no source distribution"}]},
        {**good, "index": "pypi"},
        [good],
    ]
    return [json.dumps(c) for c in cases] + [text[: len(text) // 2], "\ufeff" + text]


def test_a_damaged_table_is_refused_naming_it(first: indexserver.Server, shipped: Path) -> None:
    url = indexserver.url(first)
    table, _read = boundsupdate.update(Scanner(url, use_cache=False), None)
    good = boundstable.dumps(table)
    fetched = len(_sdists_fetched(first))
    for n, text in enumerate(_damaged(good)):
        shipped.write_text(text)
        boundstable._loaded.clear()
        with pytest.raises(UnreadableFile) as caught:
            transformers_bounds(Scanner(url), Version("0.17.1"))
        assert str(shipped) in caught.value.message, n
    shipped.write_bytes(b" " * (boundstable.MAX_TABLE + 1))
    boundstable._loaded.clear()
    with pytest.raises(UnreadableFile, match="reads at most"):
        boundstable.shipped()
    assert len(_sdists_fetched(first)) == fetched  # never an answer from the sdist instead
    shipped.write_text(good)
    boundstable._loaded.clear()
    assert transformers_bounds(Scanner(url), Version("0.3.0")) == {}


@pytest.mark.network
@pytest.mark.parametrize("version", ["0.8.5", "0.33.0"])
def test_the_shipped_table_equals_a_fresh_read_of_the_sdist(version: str) -> None:
    scanner = Scanner(index_url(DEFAULT_INDEX), use_cache=False)
    sdist = scanner.sdists("vllm")[Version(version)]
    found, registry = read_sdist(scanner, Version(version), sdist)
    table = boundstable.shipped()
    assert table is not None
    entry = table.releases[Version(version)]
    assert (entry.sdist, entry.registry, dict(entry.bounds)) == (sdist.filename, registry, found)
    assert found  # both releases bound some architectures


def test_history_answers_from_the_table_and_refuses_a_damaged_one(
    tmp_path: Path, shipped: Path
) -> None:
    files = {"tests/models/registry.py": REGISTRY.replace("NimbusForCausalLM", "LlamaForCausalLM")}
    folder = tmp_path / "index"
    folder.mkdir()
    Wheel("vllm", "0.17.1", dict(layouts.vllm_0330().files), sdist=True, sdist_files=files).write(
        folder
    )
    with indexserver.serve(folder) as server:
        url = indexserver.url(server)
        table, _read = boundsupdate.update(Scanner(url, use_cache=False), None)
        entry = table.releases[Version("0.17.1")]
        marked = {"LlamaForCausalLM": Bound(architecture="LlamaForCausalLM", minimum="4.61")}
        releases = {Version("0.17.1"): Release("0.17.1", entry.sdist, True, marked)}
        shipped.write_text(boundstable.dumps(dataclasses.replace(table, releases=releases)))
        fetched = len(_sdists_fetched(server))
        res = envkit("history", "LlamaForCausalLM", "--index-url", url, "--json", cwd=tmp_path)
        res.assert_ok()
        assert '"min": "4.61"' in res.out and len(_sdists_fetched(server)) == fetched
        shipped.write_text(shipped.read_text().replace('"4.61"', '"four"'))
        boundstable._loaded.clear()
        res = envkit("history", "Qwen3ForCausalLM", "--index-url", url, "--json", cwd=tmp_path)
    assert res.code != 0 and str(shipped) in res.err and "Traceback" not in res.err
