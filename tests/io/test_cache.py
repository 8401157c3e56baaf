"""One cache, validated (issue 18, item 5): every kind of entry envkit keeps (scans, test
bounds, compat reports, model types, torch builds) is read through ``envkit.io.cache`` like
any other input. A bad entry (wrong types, out of range, deep, huge, a link, a FIFO) is
discarded and read again from the source: the command answers as from a clean cache,
never with a traceback and never with the bad entry's verdict."""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from bounded import Case, bounded_cases
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.version import Version
from properties import examples

from envkit.compat.report import Code, CompatReport, Incompatibility
from envkit.compat.report import load_cached as load_report
from envkit.compat.report import store as store_report
from envkit.io import cache
from envkit.io.cache import BadEntry, Fields
from envkit.io.urls import index_key
from envkit.profiles.bounds import Bound
from envkit.releases.registry import Scan, load_cached

import indexserver
from helpers import envkit

PROPERTY = settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
ARCH = "Qwen2VLForConditionalGeneration"
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _link(target: str) -> Callable[[Path], None]:
    return lambda path: path.symlink_to(target)


def _text(text: str | bytes) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        path.write_bytes(text if isinstance(text, bytes) else text.encode())

    return write


def _huge(path: Path) -> None:
    with open(path, "wb") as handle:  # 100 MB said, a hole on disk
        handle.truncate(100 * 1024 * 1024)


def _field(key: str, value: object) -> Callable[[dict[str, Any]], object]:
    return lambda good: {**good, key: value}


# bad scan entries: a good one changed, or something else put in its place
CHANGED: dict[str, Callable[[dict[str, Any]], object]] = {
    "requires-text": _field("requires", "x"),
    "bytes-read-text": _field("bytes_read", "x"),
    "architectures-number": _field("architectures", 5),
    "architectures-numbers": _field("architectures", [5, 6]),
    "dropped-not-text": _field("previously_supported", {ARCH: 5}),
    "bounds-list": _field("transformers_bounds", [1]),
    "bound-not-a-version": _field("transformers_bounds", {ARCH: {"min": "soon"}}),
    "negative-requests": _field("requests", -1),
    "bool-for-number": _field("wheel_bytes", True),
    "other-release": _field("version", "9.9.9"),
    "other-project": _field("project", "torch"),
    "not-an-object": lambda _good: [1, 2],
}
PUT: dict[str, Callable[[Path], None]] = {
    "nan": _text('{"project": "vllm", "version": "0.8.5", "seconds": NaN}'),
    "deep": _text("[" * 200_000 + "]" * 200_000),
    "not-json": _text("{"),
    "not-utf8": _text(b"\xff\xfe{}"),
    "huge": _huge,
    "fifo": _fifo,
    "dev-zero": _link("/dev/zero"),
}


def _warm(world: indexserver.Server, root: Path) -> dict[str, Any]:
    """A cache holding every scan and bound history reads, and the clean answers."""
    env = {"ENVKIT_CACHE_DIR": str(root)}
    url = indexserver.url(world)
    scan = envkit("scan", "vllm==0.8.5", "--json", "--index-url", url, cwd=root, env=env)
    history = envkit("history", ARCH, "--json", "--index-url", url, cwd=root, env=env)
    assert scan.code == 0 and history.code == 0, scan.err + history.err
    return {"scan": scan.json(), "history": history.json()}


def _same(answer: dict[str, Any], clean: dict[str, Any]) -> bool:
    cost = {"cached", "bytes_read", "requests", "seconds"}
    return {k: v for k, v in answer.items() if k not in cost} == {
        k: v for k, v in clean.items() if k not in cost
    }


def test_bad_scan_entries_are_read_again_from_the_wheel(
    world: indexserver.Server, tmp_path: Path
) -> None:
    """Garbage in the scan of vLLM 0.8.5 crashed `scan` and `history` (or became their
    answer). Each kind of garbage is put in a copy of a warm cache; both commands run in a
    memory-limited child, answer as from a clean cache, and leave a good entry behind."""
    base = tmp_path / "warm"
    base.mkdir()
    clean = _warm(world, base)
    [entry] = (base / "scans").glob("vllm-0.8.5.*.v2.json")
    good = json.loads(entry.read_text())
    url = indexserver.url(world)
    cases: list[Case] = []
    for name in [*CHANGED, *PUT]:
        root = tmp_path / name
        shutil.copytree(base, root)
        spoilt = root / "scans" / entry.name
        spoilt.unlink()
        if name in CHANGED:
            spoilt.write_text(json.dumps(CHANGED[name](good)))
        else:
            PUT[name](spoilt)
        env = {"ENVKIT_CACHE_DIR": str(root)}
        cases.append((root, ["scan", "vllm==0.8.5", "--json", "--index-url", url], env))
        cases.append((root, ["history", ARCH, "--json", "--index-url", url], env))
    results = bounded_cases(cases)
    for (cwd, argv, *_env), (res, took) in zip(cases, results, strict=True):
        assert res.code == 0 and "Traceback" not in res.err, (cwd.name, argv, res.err)
        assert took < 10, (cwd.name, argv)
        answer = res.json()
        assert _same(answer, clean[argv[0]]), (cwd.name, argv)
        if argv[0] == "scan":
            assert answer["cached"] is False, cwd.name  # read again, not believed
        again = cwd / "scans" / entry.name
        assert again.is_file() and not again.is_symlink(), cwd.name
        assert _same(json.loads(again.read_text()), good), cwd.name  # a good entry again


def test_a_folder_in_place_of_an_entry_costs_time_only(
    world: indexserver.Server, scan_cache: Path, tmp_path: Path
) -> None:
    url = indexserver.url(world)
    first = envkit("scan", "vllm==0.8.5", "--json", "--index-url", url, cwd=tmp_path)
    [entry] = (scan_cache / "scans").glob("vllm-0.8.5.*")
    entry.unlink()
    entry.mkdir()
    again = envkit("scan", "vllm==0.8.5", "--json", "--index-url", url, cwd=tmp_path)
    assert again.code == 0 and _same(again.json(), first.json())
    assert entry.is_dir()  # not envkit's to delete; never read either


def test_a_link_in_the_cache_is_neither_followed_nor_written_through(
    world: indexserver.Server, scan_cache: Path, tmp_path: Path
) -> None:
    """Someone's file linked in place of an entry: envkit reads the source again and
    replaces the link with its own entry; the file the link pointed at is untouched."""
    url = indexserver.url(world)
    first = envkit("scan", "vllm==0.8.5", "--json", "--index-url", url, cwd=tmp_path)
    [entry] = (scan_cache / "scans").glob("vllm-0.8.5.*")
    planted = tmp_path / "planted.json"
    planted.write_text(json.dumps({**first.json(), "architectures": ["Planted"]}))
    entry.unlink()
    entry.symlink_to(planted)
    again = envkit("scan", "vllm==0.8.5", "--json", "--index-url", url, cwd=tmp_path)
    assert again.code == 0 and "Planted" not in again.json()["architectures"]
    assert entry.is_file() and not entry.is_symlink()
    assert json.loads(planted.read_text())["architectures"] == ["Planted"]


@pytest.mark.parametrize(
    "bad",
    [
        {"bounds": {"Glm4ForCausalLM": {"min": 4.52}}},
        {"source": "x", "bounds": {"Glm4ForCausalLM": {"min": "four"}}},
        {"source": "x", "bounds": []},
        {"bounds": {}},  # no source: not an entry envkit wrote
    ],
)
def test_bad_bounds_entries_are_read_again_from_the_sdist(
    world: indexserver.Server, scan_cache: Path, tmp_path: Path, bad: dict[str, Any]
) -> None:
    url = indexserver.url(world)
    first = envkit("scan", "vllm==0.8.5", "--json", "--index-url", url, cwd=tmp_path)
    bounds = first.json()["transformers_bounds"]
    assert bounds  # the world's 0.8.5 sdist has a test registry
    [entry] = (scan_cache / "bounds").glob("vllm-0.8.5.*.v2.json")
    entry.write_text(json.dumps(bad))
    again = envkit("scan", "vllm==0.8.5", "--json", "--index-url", url, cwd=tmp_path)
    assert again.code == 0 and again.json()["transformers_bounds"] == bounds
    assert json.loads(entry.read_text())["bounds"] == bounds


def _report() -> CompatReport:
    finding = Incompatibility(
        code=Code.MISSING_NAME,
        name="WHISPER_ATTENTION_CLASSES",
        module="transformers.models.whisper.modeling_whisper",
        file="vllm/model_executor/models/minicpmo.py",
        line=33,
        places=2,
        architectures=("MiniCPMO",),
    )
    return CompatReport(
        vllm="0.8.5",
        transformers="5.0.0",
        reference="4.51.3",
        findings=(finding,),
        imports_checked=334,
        undecided=("transformers",),
        wheels=("vllm-0.8.5-py3-none-any.whl",),
        wheel_bytes=10,
        bytes_read=5,
        requests=3,
        seconds=1.5,
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("findings", [{"code": "bogus"}]),
        ("findings", "none"),
        ("imports_checked", -1),
        ("cost", None),
        ("vllm", "latest"),
        ("undecided", [None]),
    ],
)
def test_bad_compat_reports_are_never_a_verdict(scan_cache: Path, key: str, value: object) -> None:
    index = "http://127.0.0.1:9/simple"
    report = _report()
    store_report(report, index)
    kept = load_report(Version("0.8.5"), Version("5.0.0"), index)
    assert kept is not None and kept.findings == report.findings and kept.cached
    [entry] = (scan_cache / "compat").glob("*.json")
    assert entry.name == f"vllm-0.8.5+transformers-5.0.0.{index_key(index)}.v4.json"
    entry.write_text(json.dumps({**json.loads(entry.read_text()), key: value}))
    assert load_report(Version("0.8.5"), Version("5.0.0"), index) is None
    assert not entry.exists()  # discarded: the next check stores a good one


def test_the_kinds_keep_the_names_their_entries_had(scan_cache: Path) -> None:
    """No needless invalidation: every kind's file names are the ones envkit used before."""
    sha = "ab" * 32
    assert cache.SCANS.path("vllm-0.8.5.k") == scan_cache / "scans" / "vllm-0.8.5.k.v2.json"
    assert cache.BOUNDS.path("vllm-0.8.5.k") == scan_cache / "bounds" / "vllm-0.8.5.k.v2.json"
    assert (
        cache.COMPAT.path("p.k") == scan_cache / "compat" / "p.k.v4.json"
    )  # processors, conditions
    assert (
        cache.MODEL_TYPES.path("model-types-5.0.k")
        == scan_cache / "site" / "model-types-5.0.k.json"
    )
    assert cache.TORCH_BUILDS.path(sha) == scan_cache / "torch-builds" / f"{sha}.json"
    newer = cache.Kind("torch-builds", 2, 1024, numbered=False)  # a new format is numbered
    assert newer.path(sha).name == f"{sha}.v2.json"


def test_keys_that_are_not_file_names_are_never_used(scan_cache: Path) -> None:
    for key in ("../escape", "a/b", "", ".hidden", "x" * 300):
        cache.TORCH_BUILDS.store(key, {"cuda": "12.4"})
        assert cache.TORCH_BUILDS.load(key, lambda f: f.text("cuda")) is None
    assert not (scan_cache.parent / "escape.json").exists()
    assert not list(scan_cache.rglob("*.json"))


def test_an_entry_larger_than_its_kind_reads_is_not_stored(scan_cache: Path) -> None:
    small = cache.Kind("tiny", 1, 64)
    small.store("k", {"text": "x" * 100})
    assert not small.path("k").exists()
    small.store("k", {"text": "x"})
    assert small.load("k", lambda f: f.text("text")) == "x"


def test_model_types_and_torch_builds_entries_are_checked(scan_cache: Path) -> None:
    from envkit.releases.torchbuilds import _cuda_entry

    sha = "cd" * 32
    for bad in ({"cuda": 12.4}, {"cuda": "12.4; rm -rf /"}, {}, {"cuda": None}):
        cache.TORCH_BUILDS.store(sha, bad)
        assert cache.TORCH_BUILDS.load(sha, _cuda_entry) is None
    cache.TORCH_BUILDS.store(sha, {"cuda": ""})  # a CPU build
    assert cache.TORCH_BUILDS.load(sha, _cuda_entry) == ""

    def types(f: Fields) -> dict[str, tuple[str, ...]]:
        return {arch: f.texts(arch) for arch in list(f.data)}

    for bad in ({"LlamaForCausalLM": "llama"}, {"LlamaForCausalLM": [1]}, []):  # type: ignore[assignment]
        cache.MODEL_TYPES.store("model-types-5.0.k", bad)
        assert cache.MODEL_TYPES.load("model-types-5.0.k", types) is None
    cache.MODEL_TYPES.store("model-types-5.0.k", {"LlamaForCausalLM": ["llama"]})
    assert cache.MODEL_TYPES.load("model-types-5.0.k", types) == {"LlamaForCausalLM": ("llama",)}


# ---- properties ----

names = st.text(alphabet="abcXYZ_0123456789", min_size=1, max_size=20)
versions = st.builds(lambda a, b, c: f"{a}.{b}.{c}", *(st.integers(0, 40) for _ in range(3)))
scans = st.builds(
    Scan,
    project=st.just("vllm"),
    version=versions,
    architectures=st.lists(names, max_size=6).map(tuple),
    model_types=st.lists(names, max_size=6).map(tuple),
    previously_supported=st.dictionaries(names, versions, max_size=3),
    out_of_tree=st.dictionaries(names, names, max_size=3),
    requires=st.dictionaries(st.sampled_from(["torch", "transformers"]), st.text(max_size=12)),
    requires_python=st.text(max_size=12),
    transformers_bounds=st.dictionaries(
        names,
        st.builds(
            lambda lo, r: Bound(architecture="", minimum=lo, reason=r).to_dict(),
            versions,
            st.text(max_size=10),
        ),
        max_size=3,
    ),
    wheel=st.text(max_size=20),
    wheel_bytes=st.integers(0, 2**40),
    bytes_read=st.integers(0, 2**40),
    requests=st.integers(0, 10**6),
    seconds=st.floats(0, 10**6),
)


@PROPERTY
@given(scan=scans)
def test_every_scan_survives_the_cache_as_it_was(scan: Scan, scan_cache: Path) -> None:
    index = "http://127.0.0.1:9/simple"
    cache.SCANS.store(f"vllm-{scan.version}.{index_key(index)}", scan.to_dict())
    back = load_cached("vllm", Version(scan.version), index)
    assert back is not None and back == Scan(**{**scan.__dict__, "cached": True})


@PROPERTY
@given(scan=scans, key=st.sampled_from(sorted(Scan.__dataclass_fields__)), value=json_values)
def test_any_field_replaced_by_anything_is_a_scan_or_discarded(
    scan: Scan, key: str, value: object, scan_cache: Path
) -> None:
    """Every field of a scan replaced by any JSON value: the cache gives a Scan whose fields
    all have their types and ranges, or nothing (and deletes the entry); never an error."""
    index = "http://127.0.0.1:9/simple"
    name = f"vllm-{scan.version}.{index_key(index)}"
    cache.SCANS.store(name, {**scan.to_dict(), key: value})
    back = load_cached("vllm", Version(scan.version), index)
    if back is None:
        assert not cache.SCANS.path(name).exists()
        return
    assert all(isinstance(a, str) for a in (*back.architectures, *back.model_types))
    for table in (back.previously_supported, back.out_of_tree, back.requires):
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in table.items())
    for bound in back.transformers_bounds.values():
        assert all(isinstance(v, str) for v in bound.values())
    numbers = (back.wheel_bytes, back.bytes_read, back.requests)
    assert all(type(n) is int and n >= 0 for n in numbers)
    assert isinstance(back.seconds, float) and math.isfinite(back.seconds) and back.seconds >= 0
    assert isinstance(back.wheel, str) and isinstance(back.requires_python, str)


@PROPERTY
@given(text=st.text(max_size=200) | st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
def test_any_text_in_an_entry_is_a_value_or_discarded(text: str, scan_cache: Path) -> None:
    path = cache.BOUNDS.path("vllm-0.8.5.k")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", errors="surrogateescape")
    value = cache.BOUNDS.load(
        "vllm-0.8.5.k",
        lambda f: {a: Bound.from_entry(a, b) for a, b in f.table_map("bounds").items()},
    )
    if value is None:
        assert not path.exists()
    else:
        assert all(isinstance(b, Bound) for b in value.values())


def test_fields_refuse_what_their_kind_does_not_hold() -> None:
    f = Fields({"n": True, "t": 5, "l": "x", "m": {"a": 1}, "x": float("inf")}, "entry")
    for read in (
        lambda: f.whole("n"),
        lambda: f.text("t"),
        lambda: f.texts("l"),
        lambda: f.text_map("m"),
        lambda: f.number("x"),
        lambda: f.text("missing"),
        lambda: Fields([], "entry"),
    ):
        with pytest.raises(BadEntry):
            read()
    assert f.text("missing", "default") == "default" and f.text_map("absent") == {}


# --- a knowledge snapshot's entries (index.snapshot), and the entries a run touched ---------


def _flags(f: Fields) -> str:
    return f.text("v")


def test_a_snapshots_entries_answer_first_and_are_never_deleted(scan_cache: Path) -> None:
    kind = cache.SERVE_FLAGS
    kind.store("k", {"v": "disk"})
    name = kind.name("k")
    assert name == "serve-flags/k.v1.json"
    cache.use_overlay({name: '{"v": "snapshot"}', kind.name("bad"): "[1]"})
    try:
        assert kind.load("k", _flags) == "snapshot"
        assert kind.load("bad", _flags) is None  # a bad one reads as absent...
        assert cache.entry_text(kind.name("bad")) == "[1]"  # ...and stays what it was
    finally:
        cache.use_overlay(None)
    assert kind.load("k", _flags) == "disk"


def test_the_entries_a_run_reads_or_writes_are_recorded_while_asked(scan_cache: Path) -> None:
    kind = cache.SERVE_FLAGS
    kind.store("before", {"v": "1"})
    cache.record_touched(True)
    try:
        kind.load("before", _flags)
        kind.store("new", {"v": "2"})
        kind.load("absent", _flags)
        assert cache.touched() == {kind.name("before"), kind.name("new")}
    finally:
        cache.record_touched(False)
    assert cache.touched() == frozenset()
    assert cache.entry_text(kind.name("new")) == '{"v": "2"}'


@pytest.mark.parametrize(
    "name",
    ["../x.json", "scans/../../etc/passwd.json", "/etc/x.json", "nothing/x.json", "scans/x", ""],
)
def test_only_names_of_kinds_envkit_keeps_are_entries(scan_cache: Path, name: str) -> None:
    assert not cache.entry_name_ok(name)
    assert cache.entry_text(name) is None
