"""The parsed TOML of valid profiles, kept in envkit's cache by the text's sha256: read back
without tomlkit, validated as ever (the same Profile, the same problems and messages), and
an entry that is not what tomldoc wrote (or names what the text does not) discarded."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from hypothesis import given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.errors import ProfileError
from envkit.io.cache import PROFILES
from envkit.profiles import profile as profile_module
from envkit.profiles import tomldoc
from envkit.profiles.profile import Profile, parse_profile

from helpers import ROOT, profile_text

SHIPPED = sorted((ROOT / "envs").glob("*.toml"))
ORDERED = profile_text(extra='[models]\npreviously_supported = { Zeta = "0.9", Alpha = "0.8" }\n')


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(profile_module, "_PARSED", {})  # no memory of this process either
    return tmp_path / "cache"


def parse(text: str) -> Any:
    profile_module._PARSED.clear()
    return parse_profile(text, path=Path("p.toml"), name="p")


def no_tomlkit(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*_args: Any) -> Any:
        raise AssertionError("tomlkit parsed a text met before")

    monkeypatch.setattr(tomlkit, "parse", refused)


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_a_shipped_profile_is_read_back_without_tomlkit(
    path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = path.read_text()
    fresh = parse(text)
    assert PROFILES.path(tomldoc._key(text)).is_file()
    no_tomlkit(monkeypatch)
    assert parse(text) == fresh


def test_the_order_of_a_table_survives_the_cache(cache: Path) -> None:
    fresh = parse(ORDERED)
    again = parse(ORDERED)
    assert list(again.models.previously_supported) == ["Zeta", "Alpha"]
    assert again == fresh


@pytest.mark.parametrize(
    "text",
    [
        "python = \n",  # malformed TOML: tomlkit's message and line
        'python = "3.12"\n',  # a required key missing
        profile_text(extra='exclude_newer = "soon"\n'),  # a bad value
        profile_text(extra='descripton = "typo"\n'),  # an unknown key
    ],
)
def test_a_broken_profile_is_never_kept_and_says_the_same_each_time(text: str, cache: Path) -> None:
    said = []
    for _ in range(2):
        with pytest.raises(ProfileError) as info:
            parse(text)
        said.append([(p.key, p.line, p.message) for p in info.value.problems])
    assert said[0] == said[1]
    assert not PROFILES.path(tomldoc._key(text)).exists()


def test_a_text_with_an_escape_is_parsed_each_time(cache: Path) -> None:
    text = profile_text(extra='exclude_newer = "2025-05-20"\n').replace(
        '"test profile"', '"caf\\u00e9"'
    )
    assert parse(text).description == "café"
    assert not PROFILES.path(tomldoc._key(text)).exists()  # "café" is not spelled in it


def tampered(text: str, change: Any) -> Path:
    parse(text)
    entry = PROFILES.path(tomldoc._key(text))
    data = json.loads(entry.read_text())
    entry.write_text(json.dumps(change(data)))
    return entry


def _add_requirement(data: dict[str, Any]) -> dict[str, Any]:
    for pair in data["doc"]["t"]:
        if pair[0] == "requirements":
            pair[1]["a"].append("evil==1.0")
    return data


@pytest.mark.parametrize(
    "change",
    [
        _add_requirement,  # a requirement the file does not name
        lambda d: {"doc": {"t": [["python", 3]]}},  # a number
        lambda d: {"doc": {"t": [["python", "3.12"], ["python", "3.12"]]}},  # a key twice
        lambda d: {"doc": ["not", "a", "table"]},
        lambda d: {"doc": {"a": []}},
        lambda d: {"nothing": True},
        lambda d: [d],
        lambda d: d["doc"],
    ],
    ids=["requirement", "number", "twice", "list", "array", "no-doc", "not-object", "bare"],
)
def test_an_entry_tomldoc_did_not_write_is_discarded(
    change: Any, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = profile_text()
    fresh = parse(text)
    entry = tampered(text, change)
    assert parse(text) == fresh  # parsed afresh, the bad entry deleted and a good one kept
    data = json.loads(entry.read_text())
    assert "evil==1.0" not in entry.read_text() and "doc" in data
    no_tomlkit(monkeypatch)
    assert parse(text) == fresh


def test_a_deep_entry_is_refused(cache: Path) -> None:
    text = profile_text()
    fresh = parse(text)
    deep: Any = "x"
    for _ in range(50):
        deep = {"a": [deep]}
    tampered(text, lambda d: {"doc": {"t": [["python", deep]]}})
    assert parse(text) == fresh


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=examples(60), deadline=None)
@given(json_values)
def test_any_json_in_an_entry_gives_the_fresh_profile(value: Any) -> None:
    text = profile_text()
    fresh = parse(text)
    tampered(text, lambda _d: value)
    assert parse(text) == fresh


SPELLED = (
    profile_text(extra="models.previously_supported = { 'Zeta' = '0.9' }\n")
    .replace('python = "', "python = '")
    .replace('"\nrequirements', "'\nrequirements")
    .replace('"test profile"', '"""two\nlines"""')
)


@pytest.mark.parametrize(
    "text",
    [
        SPELLED,  # literal strings, a dotted key, an inline table, a multi-line string
        SPELLED.replace("\n", "\r\n"),  # tomlkit's: it keeps the string's CRLF
        profile_text(extra='notes = """two\nlines"""\n'),  # an unknown key
        profile_text(extra='exclude_newer = "soon"\n'),  # TOML, but not a profile
        "python = \n",  # malformed TOML
    ],
    ids=["spelled", "crlf", "unknown-key", "bad-value", "malformed"],
)
def test_a_new_text_is_read_by_tomllib_as_tomlkit_reads_it(
    text: str, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A text not met before is read by the standard library's tomllib first: a valid one
    without tomlkit, a broken one said exactly as tomlkit's reading says it."""

    def outcome() -> Any:
        try:
            return parse(text)
        except ProfileError as exc:
            return str(exc), exc.problems

    with monkeypatch.context() as patched:
        patched.setattr(tomldoc, "quick", lambda _text: None)  # tomlkit alone, as before
        before = outcome()
    PROFILES.path(tomldoc._key(text)).unlink(missing_ok=True)
    if text == SPELLED:
        assert isinstance(before, Profile)
        if sys.version_info >= (3, 11):  # 3.10 has no tomllib: tomlkit reads every new text
            no_tomlkit(monkeypatch)
    else:
        assert isinstance(before, tuple) or "\r" in text
    assert outcome() == before
