"""The record every check returns (envkit.results): its dict round trip, the order of its
severities, what fails a command, and that its JSON is the schema's one ``$defs/result``."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from envkit.compat import report as compat
from envkit.fleet import judge
from envkit.lock.cells import CellStatus
from envkit.profiles import bounds
from envkit.results import Facts, Result, Severity, exit_code, ok, ok_result, worst
from envkit.serving.explain import signatures as explain
from envkit.serving.lint import check as lint

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
        Result("c", Severity.OK)  # type: ignore[call-arg]  # keyword-only
    assert not hasattr(result, "__dict__")  # slotted


@pytest.mark.parametrize("bad", ["fatal", "", "ERROR"])
def test_a_severity_it_does_not_know_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="is not a valid Severity"):
        Result.from_dict({"code": "c", "severity": bad})


# the modules whose results each command family returns, and the codes made by name (enums,
# tables, constants) rather than by a literal at the call
ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "envkit"
FAMILIES: dict[str, tuple[tuple[str, ...], Callable[[], set[str]]]] = {
    "verify, build": (
        ("env/verify.py", "env/gpuchecks.py", "env/pairs.py", "gpu/installed/verdicts.py"),
        set,
    ),
    "doctor": (
        ("env/doctor.py", "env/pairs.py", "gpu/installed/verdicts.py"),
        lambda: {"drift-KIND"},
    ),
    "check-model, which, plan, new-profile": (
        (
            "models/check_model.py",
            "gpu/published/profilefit.py",
            "serving/plan/memory_plan.py",
            "serving/plan/mmbudget.py",
            "serving/plan/verdict.py",
        ),
        lambda: {bounds.TOO_OLD, bounds.TOO_NEW, bounds.HF_ONLY},
    ),
    "compat": ((), lambda: {c.value for c in compat.Code}),
    "explain, serve": (("serving/explain/causes.py",), lambda: {c.value for c in explain.Code}),
    "lint": ((), lambda: set(lint.CODES)),
    "fleet check": (("fleet/judge.py",), lambda: set(judge.CHECKS)),
    "lock, matrix": ((), lambda: {f"cell-{s.value}" for s in CellStatus}),
    "probe, serve": (("serving/run/probe.py",), set),
    "profile problems": (("errors.py",), set),
}
# codes doctor never lists: it shows what is not ok
NOT_LISTED = {"doctor": {"compat", "driver-fits"}}
MAKERS = {"Result", "check", "_warning"}


def made_in(path: str) -> set[str]:
    """The codes ``path`` gives a result as a literal: ``Result(code=...)``,
    ``check(kind=...)`` or a maker's first argument."""
    found: set[str] = set()
    for node in ast.walk(ast.parse((SRC / path).read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        if name not in MAKERS:
            continue
        for keyword in node.keywords:
            if keyword.arg in ("code", "kind"):
                value = keyword.value
                options = (value.body, value.orelse) if isinstance(value, ast.IfExp) else (value,)
                found |= {
                    v.value
                    for v in options
                    if isinstance(v, ast.Constant) and isinstance(v.value, str)
                }
        first = node.args[0] if node.args else None
        if name != "Result" and isinstance(first, ast.Constant) and isinstance(first.value, str):
            found.add(first.value)
    return found


def listed() -> dict[str, set[str]]:
    """docs/results.md's codes, per ``### family`` heading."""
    out: dict[str, set[str]] = {}
    family = ""
    for line in (ROOT / "docs" / "results.md").read_text().splitlines():
        if line.startswith("### "):
            family = line[4:].strip()
        elif line.startswith("Codes: "):
            out[family] = set(re.findall(r"`([^`]+)`", line))
    return out


def test_the_codes_page_lists_every_code() -> None:
    page = listed()
    assert set(page) == set(FAMILIES)
    for family, (modules, by_name) in FAMILIES.items():
        made = set().union(*(made_in(m) for m in modules), by_name())
        made -= NOT_LISTED.get(family, set())
        assert page[family] == made, f"docs/results.md, {family}: {page[family] ^ made}"
