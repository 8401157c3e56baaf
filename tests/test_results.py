"""The record every check returns (envkit.results): its dict round trip, the order of its
severities, what fails a command, and that its JSON is the schema's one ``$defs/result``."""

from __future__ import annotations

import dataclasses
import json

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from envkit.results import Facts, Result, Severity, exit_code, ok, ok_result, worst

from helpers import schema

text = st.text(max_size=40)
evidence = st.one_of(
    st.lists(text, max_size=4).map(tuple),
    st.dictionaries(text, text, max_size=4).map(Facts),
)
results = st.builds(
    Result,
    code=st.text(min_size=1, max_size=30),
    severity=st.sampled_from(Severity),
    subject=text,
    message=text,
    evidence=evidence,
    fix=text,
)
RESULT = jsonschema.Draft202012Validator({**schema("outputs"), "$ref": "#/$defs/result"})


@given(results)
def test_to_dict_round_trips_through_json_and_meets_the_schema(result: Result) -> None:
    data = json.loads(json.dumps(result.to_dict()))
    assert Result.from_dict(data) == result
    assert set(data) == {"code", "severity", "subject", "message", "evidence", "fix"}
    RESULT.validate(data)


@given(st.lists(results, max_size=6))
def test_worst_ok_and_the_exit_code_agree(found: list[Result]) -> None:
    gravest = worst(found)
    assert all(r.severity <= gravest for r in found)
    assert ok(found) == (gravest is not Severity.ERROR) == (exit_code(found) == 0)


def test_the_severities_are_ordered_and_only_error_fails() -> None:
    order = [Severity.OK, Severity.INFO, Severity.WARNING, Severity.UNKNOWN, Severity.ERROR]
    assert sorted(reversed(order)) == order == list(Severity)
    assert [s.failed for s in order] == [False, False, False, False, True]
    # a check that could not be made is no pass and no fail: worse than a warning, no exit 1
    unknown = Result(code="pair-not-checked", severity=Severity.UNKNOWN)
    assert worst([ok_result("python"), unknown]) is Severity.UNKNOWN and exit_code([unknown]) == 0
    assert worst([]) is Severity.OK


def test_the_record_is_frozen_hashable_and_its_evidence_too() -> None:
    result = Result(code="c", severity=Severity.ERROR, evidence={"found": "5.0.0"})
    assert isinstance(result.evidence, Facts) and result.fact("found") == "5.0.0"
    assert result.fact("missing", "-") == "-" and hash(result) == hash(dataclasses.replace(result))
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.code = "d"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Result("c", Severity.OK)  # type: ignore[misc]  # keyword-only
    assert not hasattr(result, "__dict__")  # slotted


@pytest.mark.parametrize("bad", ["fatal", "", "ERROR"])
def test_a_severity_it_does_not_know_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="is not a valid Severity"):
        Result.from_dict({"code": "c", "severity": bad})
