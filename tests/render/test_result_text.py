"""The compat and explain text views are drawn from the one result record (``Result``) that
their ``--json`` carries: parsed back from the JSON, a finding or cause is the record the text
was drawn from, and the text says what each of the record's fields says."""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable

import jsonschema
import pytest
from bootlogs import FAILURES, log
from hypothesis import given
from hypothesis import strategies as st

from envkit.compat.report import Code, CompatReport, Incompatibility
from envkit.lock.cells import Cell, CellState, CellStatus
from envkit.render import locks, models, serving
from envkit.results import Result, Severity
from envkit.serving.explain.causes import MAX_TEXT, Explanation, explain, scan_stream
from envkit.serving.explain.envpins import Installed
from envkit.serving.explain.knowledge import Tables

from helpers import schema


def printed(show: Callable[[], None]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        show()
    return out.getvalue()


def flat(text: str) -> str:
    """Text without its folding (a paragraph wraps at the terminal's width)."""
    return " ".join(text.split())


# what vLLM's source gives: Python names, and checkpoint labels such as formats.py makes;
# each the strings st.from_regex drew for its pattern (in the comment), built from their parts:
# the same space at a fraction of the cost (drawing from a regex was 9 in 10 of the test's time)
LOWER, UPPER, DIGITS = "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789"
# r"[A-Za-z_][A-Za-z0-9_.\-]{0,20}"
names = st.builds(
    str.__add__,
    st.sampled_from(LOWER + UPPER + "_"),
    st.text(LOWER + UPPER + DIGITS + "_.-", max_size=20),
)
# r"[a-z]{3,8}"
_word = st.text(LOWER, min_size=3, max_size=8)
# r"[a-z0-9]{1,8} checkpoint( with [a-z]{3,8}(/[a-z]{3,8})?)?"
labels = st.builds(
    lambda head, kind: f"{head} checkpoint{kind}",
    st.text(LOWER + DIGITS, min_size=1, max_size=8),
    st.one_of(
        st.just(""),
        _word.map(" with {}".format),
        st.tuples(_word, _word).map(lambda w: f" with {w[0]}/{w[1]}"),
    ),
)
findings = st.builds(
    Incompatibility,
    code=st.sampled_from(Code),
    name=names,
    module=st.one_of(st.just(""), names),
    # r"vllm/[a-z_/]{1,30}\.py"
    file=st.text(LOWER + "_/", min_size=1, max_size=30).map("vllm/{}.py".format),
    line=st.integers(1, 99_999),
    places=st.integers(1, 50),
    removed_in=st.sampled_from(["", "5.0.0", "4.53.0"]),
    taken_in=st.sampled_from(["", "4.53.0"]),
    detail=st.text(st.characters(codec="ascii", categories=["L", "N", "P", "Zs"]), max_size=120),
    architectures=st.lists(names, max_size=3, unique=True).map(tuple),
    model_types=st.lists(names, max_size=3, unique=True).map(tuple),
    processors=st.lists(names, max_size=2, unique=True).map(tuple),
    conditions=st.lists(labels, max_size=2, unique=True).map(tuple),
)


def said_by_fields(f: Incompatibility) -> str:
    """What a finding says, written from its own fields (not from its result): the words the
    compat page shows."""
    where = f"{f.file}:{f.line}" + (f" (+{f.places - 1} more)" if f.places > 1 else "")
    origin = f" from {f.module}" if f.module and f.module != f.name else ""
    removed = f", removed in {f.removed_in}" if f.removed_in else ""
    taken = f", transformers' own since {f.taken_in}" if f.taken_in else ""
    said = [f"{f.code.value}: {f.name}{origin}{removed}{taken}", f"used at {where}"]
    if f.detail:
        said.append(f.detail)
    only = list(f.architectures)
    if f.model_types:
        only.append(f"model type{'s' if len(f.model_types) > 1 else ''} {', '.join(f.model_types)}")
    if f.processors:
        kind = "processors" if len(f.processors) > 1 else "processor"
        only.append(f"{kind} {', '.join(f.processors)} (loaded by name, for a checkpoint whose "
                    "processor config names it)")  # fmt: skip
    only.extend(f"a {c} (vLLM tests the checkpoint for it first)" for c in f.conditions)
    if only:
        said.append("breaks only: " + "; ".join(only))
    return flat(" ".join(said))


@given(findings)
def test_a_compat_finding_is_shown_from_the_result_its_json_carries(f: Incompatibility) -> None:
    data = json.loads(json.dumps(f.to_dict()))
    assert Result.from_dict(data) == f.result  # the JSON holds the record the text reads
    assert (f.result.severity is Severity.ERROR) == f.everywhere
    shown = printed(lambda: models._compat_finding(Result.from_dict(data)))
    assert flat(shown) == said_by_fields(f)


def test_a_value_holding_the_list_separator_still_reads_back_as_one() -> None:
    f = Incompatibility(code=Code.MISSING_NAME, name="X", module="m", file="vllm/a.py", line=3,
                        conditions=("gguf, sharded checkpoint", "bin checkpoint"))  # fmt: skip
    assert f.result.facts("conditions") == ("gguf,sharded checkpoint", "bin checkpoint")
    shown = flat(printed(lambda: models._compat_finding(f.result)))
    assert "a gguf,sharded checkpoint (vLLM" in shown and "; a bin checkpoint (vLLM" in shown


def test_the_compat_report_shows_what_breaks_vllm_first_then_the_scoped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from envkit.render import term

    monkeypatch.setattr(term, "WIDE", False)  # its last paragraph folds at 100 columns
    monkeypatch.setenv("COLUMNS", "100")
    scoped = Incompatibility(code=Code.MISSING_NAME, name="WHISPER_ATTENTION_CLASSES",
                             module="transformers.models.whisper.modeling_whisper",
                             file="vllm/model_executor/models/minicpmo.py", line=33,
                             architectures=("MiniCPMO",))  # fmt: skip
    core = Incompatibility(code=Code.REMOVED_ATTRIBUTE, name="_set_token_in_kwargs",
                           module="transformers.configuration_utils.PretrainedConfig",
                           file="vllm/transformers_utils/configs/dbrx.py", line=62,
                           places=2)  # fmt: skip
    rep = CompatReport(vllm="0.8.5", transformers="5.0.0", reference="4.51.3",
                       findings=(scoped, core), imports_checked=334, cached=True)  # fmt: skip
    assert printed(lambda: models.compat(rep, False)).splitlines() == [
        "vLLM 0.8.5 + transformers 5.0.0: not compatible",
        "  removed-attribute: _set_token_in_kwargs from "
        "transformers.configuration_utils.PretrainedConfig",
        "    used at vllm/transformers_utils/configs/dbrx.py:62 (+1 more)",
        "  missing-name: WHISPER_ATTENTION_CLASSES from "
        "transformers.models.whisper.modeling_whisper",
        "    used at vllm/model_executor/models/minicpmo.py:33",
        "    breaks only: MiniCPMO",
        "  checked 334 imports, and the attributes vLLM 0.8.5 uses against transformers 4.51.3, "
        "the release",
        "    it was made against; from the cache",
    ]


def _explained(text: str, installed: Installed | None = None) -> Explanation:
    scan, stats = scan_stream(io.BytesIO(text.encode()), "test.log")
    return explain(scan, stats, Tables(), source="test.log", installed=installed)


def _said_by_result(r: Result, title: str) -> list[str]:
    where = f" ({r.subject})" if r.subject else ""
    return [f"{title}: {r.code}{where}", r.message, *r.evidence, *(f"fix: {s}" for s in r.steps)]


@pytest.mark.parametrize("code", sorted(FAILURES))
def test_an_explained_cause_is_shown_from_the_result_its_json_carries(code: str) -> None:
    result = _explained(log(FAILURES[code]))
    document = json.loads(json.dumps(result.to_dict()))
    shown = flat(printed(lambda: serving.explanation(result, False)))
    for cause, data, title in [
        (result.cause, document["cause"], "cause"),
        *((c, d, "also") for c, d in zip(result.also, document["also"], strict=True)),
    ]:
        r = Result.from_dict(data["result"])
        assert r == cause.result  # the JSON holds the record the text reads
        assert r.steps == tuple(data["fix"])  # one step a line, each its own
        for said in _said_by_result(r, title):  # every field of the record, in the text
            assert flat(said) in shown, said
    assert result.cause.code.value == code
    fixes = sum(len(c.result.steps) for c in (result.cause, *result.also))
    assert shown.count(" fix: ") == fixes  # and no step the record lacks


def test_a_long_evidence_line_is_cut_in_the_result_as_in_the_text() -> None:
    long = FAILURES["cuda-oom"][0] + " detail" * 300
    result = _explained(log([long]))
    evidence = result.cause.result.evidence
    assert isinstance(evidence, tuple)
    first = evidence[0]
    more = len(long) - MAX_TEXT
    assert first.endswith(f" … (+{more} characters; --json carries the whole line)")
    assert first.startswith(f"{result.cause.line}: {long[:MAX_TEXT]}")
    assert result.to_dict()["cause"]["evidence"][0]["text"] == long  # the whole line
    assert flat(first) in flat(printed(lambda: serving.explanation(result, False)))


def test_the_environment_checks_are_shown_from_their_results() -> None:
    installed = Installed("venv /v", {"vllm": "0.8.5", "transformers": "5.0.0"}, {})
    result = _explained(log(FAILURES["transformers-too-new"]), installed)
    assert result.environment is not None
    checks = [c.result for c in result.environment.checks]
    shown = printed(lambda: serving.explanation(result, False)).splitlines()
    verdict = {Severity.OK: "matches", Severity.ERROR: "differs", Severity.UNKNOWN: "not said"}
    for check in checks:
        assert f"  {check.message}: {verdict[check.severity]}" in shown
    assert checks[0].message == "vllm: log 0.8.5, environment 0.8.5"
    assert checks[0].severity is Severity.OK


@pytest.mark.parametrize("status", list(CellStatus))
def test_a_lock_cell_is_printed_and_carried_as_its_result(status: CellStatus) -> None:
    """lock --check's text and JSON both come from the cell's result: it fails exactly when
    the cell is failing, an unreachable index is no verdict, and the JSON item is the schema's."""
    cell = Cell(profile="p", python="3.12", platform="linux-x86_64", backend="cu124")
    state = CellState(cell=cell, status=status, reason="" if status.usable else "why: fix")
    result = state.result
    assert result.code == f"cell-{status.value}" and result.subject == f"p/{cell.name}"
    assert result.failed == status.failing
    assert (result.severity is Severity.UNKNOWN) == (status is CellStatus.UNREACHABLE)
    data = state.to_dict()
    assert Result.from_dict(data["result"]) == result
    outputs = schema("outputs")
    jsonschema.Draft202012Validator({**outputs, "$ref": "#/$defs/cell"}).validate(data)
    text = flat(printed(lambda: locks.lock_check([state], [], as_json=False)))
    assert (f"p/{cell.name}: {result.message}" in text) == result.failed
    assert ("The cell is current." in text) != result.failed  # one cell: no plural
    assert ("1 of 1 cell is stale, missing" in text) == result.failed
