"""The profile's keys, declared once (envkit.profiles.keys): the committed JSON Schema and the
key reference of docs/profiles.md are what the declaration makes, and the reader and the
schema refuse the same values, key by key."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.errors import BadInput, ProfileError
from envkit.lock.cells import digest
from envkit.profiles import forms, keys
from envkit.profiles.keys import KEYS, Kind
from envkit.profiles.profile import Profile, content_digest, load_profile, parse_profile

from helpers import ROOT, profile_text

BASE: dict[str, Any] = {"python": "3.12", "requirements": ["vllm==0.8.5"]}
# a value of each form the reader must refuse (non-ASCII digits look like digits)
BAD = "cu\u0661\u0662\u0664"


def test_the_committed_schema_and_doc_are_what_the_declaration_makes() -> None:
    schema_text = keys.SCHEMA_FILE.read_text()
    doc_text = keys.DOC_FILE.read_text()
    assert (schema_text, doc_text) == keys.generated(schema_text, doc_text), (
        "run: python -m envkit.profiles.keys --write"
    )
    assert keys.main(["--check"]) == 0
    assert keys.main(["--nonsense"]) == 2


def test_every_key_the_reader_takes_is_in_the_reference_and_the_schema() -> None:
    reference = keys.reference()
    for key in KEYS:
        if key.kind is not Kind.TABLE and "*" not in key.path:
            assert f"| `{key.path}` |" in reference
    schema = keys.schema()
    assert schema["required"] == ["python", "requirements"]
    assert schema["properties"]["torch"]["properties"]["backend"]["pattern"] == (
        forms.BACKEND.pattern
    )


def _with(path: str, value: Any) -> dict[str, Any]:
    """BASE with ``value`` at ``path`` (a ``*`` in it stands for the name ``Some``)."""
    doc: dict[str, Any] = {k: list(v) if isinstance(v, list) else v for k, v in BASE.items()}
    table = doc
    *parents, last = path.replace("*", "Some").split(".")
    for name in parents:
        table = table.setdefault(name, {})
    table[last] = value
    return doc


@functools.cache
def _profile_schema() -> jsonschema.Draft202012Validator:
    """The declared schema, checked against its metaschema once (``jsonschema.validate`` does
    that on every call: 1.7 s of this file's 2.8 s over its 54 refusals)."""
    schema = keys.schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _reader_problems(doc: dict[str, Any]) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    keys.check(doc, lambda key, message: found.append((key, message)))
    return found


@pytest.mark.parametrize("key", [k for k in KEYS if k.form is not None], ids=lambda k: k.path)
def test_the_reader_and_the_schema_refuse_a_bad_value_of_each_key(key: keys.Key) -> None:
    assert key.form is not None
    value: Any = BAD if key.kind is Kind.TEXT else [BAD]
    doc = _with(key.path, value)
    found = _reader_problems(doc)
    where = key.path.replace("*", "Some")
    assert [k for k, _m in found] == [where], found
    assert found[0][1] == key.form.refusal(BAD)
    with pytest.raises(jsonschema.ValidationError):
        _profile_schema().validate(doc)


@pytest.mark.parametrize("key", KEYS, ids=lambda k: k.path)
def test_the_reader_and_the_schema_refuse_a_value_of_the_wrong_type(key: keys.Key) -> None:
    doc = _with(key.path, 12)
    found = _reader_problems(doc)
    assert found == [(key.path.replace("*", "Some"), f"must be {key.kind.said}, not an integer")]
    with pytest.raises(jsonschema.ValidationError):
        _profile_schema().validate(doc)


def test_an_unknown_key_at_any_depth_names_the_closest_known_one() -> None:
    doc = _with("models.transformers_bounds.*.mni", "4.52")
    assert _reader_problems(doc) == [
        ("models.transformers_bounds.Some.mni", "unknown key 'mni'; did you mean 'min'?")
    ]
    assert _reader_problems(_with("matrix.zzz", [])) == [
        ("matrix.zzz", "unknown key 'zzz'; known keys: python, platforms, backends")
    ]
    assert _reader_problems({}) == [
        ("python", "required key 'python' is missing"),
        ("requirements", "required key 'requirements' is missing"),
    ]


PATTERNED = [f for f in vars(forms).values() if isinstance(f, forms.Form) and f.pattern]


@functools.cache
def _pattern_schema(pattern: str) -> jsonschema.Draft202012Validator:
    """What ``jsonschema.validate`` builds for the pattern (it checks the schema and makes a
    validator on every call): once per pattern, not once per example."""
    schema = {"type": "string", "pattern": pattern}
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@settings(max_examples=examples(300), deadline=None)
@given(st.sampled_from(PATTERNED), st.text(max_size=30))
def test_a_form_refuses_whatever_its_schema_pattern_refuses(form: forms.Form, text: str) -> None:
    """The reader never takes a string the schema refuses (its own check may refuse more:
    a PEP 440 version, a time stamp that is a real date)."""
    accepted_by_schema = _pattern_schema(form.pattern).is_valid(text)
    if form.fits(text):
        assert accepted_by_schema


def test_the_profile_digest_is_read_once_and_as_the_bytes_of_the_file(tmp_path: Path) -> None:
    for path in sorted((ROOT / "envs").glob("*.toml")):
        raw = path.read_bytes().replace(b"\r\n", b"\n")
        profile = load_profile(path)
        assert profile.digest == "sha256:" + hashlib.sha256(raw).hexdigest()
        assert digest(profile) == profile.digest
    crlf = tmp_path / "crlf.toml"
    crlf.write_bytes(profile_text().replace("\n", "\r\n").encode())
    lf = tmp_path / "lf.toml"
    lf.write_text(profile_text())
    assert load_profile(crlf).digest == load_profile(lf).digest
    assert content_digest("a\r\nb") == content_digest("a\nb") != content_digest("a\rb")
    # a profile made by hand (no text read) is read for its digest
    made = Profile(name="lf", path=lf, description="", python="3.12", requirements=("a",))
    assert digest(made) == load_profile(lf).digest


def test_the_vllm_and_transformers_pins_are_one_rule_with_one_message(tmp_path: Path) -> None:
    both = parse_profile(profile_text(), path=tmp_path / "p.toml", name="p")
    assert both.pair() is not None
    only_vllm = parse_profile(
        'python = "3.12"\nrequirements = ["vllm==0.8.5", "transformers>=4.51"]\n',
        path=tmp_path / "q.toml",
        name="q",
    )
    assert only_vllm.pair() is None
    with pytest.raises(BadInput) as info:
        only_vllm.require_pair()
    assert (
        info.value.message
        == f"Profile q ({tmp_path / 'q.toml'}) pins no exact transformers version."
    )


def test_a_bad_value_still_names_its_line(tmp_path: Path) -> None:
    text = 'python = "3.12"\nrequirements = ["a"]\n\n[torch]\nbackend = "cu1x4"\n'
    with pytest.raises(ProfileError) as info:
        parse_profile(text, path=tmp_path / "p.toml", name="p")
    [problem] = info.value.problems
    assert (problem.key, problem.line) == ("torch.backend", 5)
    assert problem.message == forms.BACKEND.refusal("cu1x4")


def test_a_wrong_value_is_named_as_toml_names_it_and_a_problem_said_once(tmp_path: Path) -> None:
    """'not an array', 'found an integer' (TOML's words, not Python's 'list', 'int'); two
    entries wrong the same way are one problem, not the same sentence twice."""
    text = profile_text(extra="exclude_newer = true\n[matrix]\npython = [1, 2]\n")
    with pytest.raises(ProfileError) as caught:
        parse_profile(text, path=tmp_path / "p.toml", name="p")
    said = [p.message for p in caught.value.problems]
    assert "must be a string, not a boolean" in said
    assert said.count("entries must be non-empty strings, found an integer") == 1
    assert caught.value.message.startswith(f"Invalid profile ({len(said)} problems): ")
