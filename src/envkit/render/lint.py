"""``envkit lint``'s report: each finding with its fix, or that the arguments hold."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envkit.render.term import echo, emit_json, wrap
from envkit.wording import listed

if TYPE_CHECKING:  # the core is loaded by the command that uses it
    from envkit.serving.lint.check import LintFinding, LintReport

_COLOUR = {"error": "red", "warning": "yellow", "info": "cyan"}


def lint_lines(findings: tuple[LintFinding, ...], *, err: bool = False) -> None:
    """The findings as plan, serve and explain show them too."""
    for finding in findings:
        echo(
            wrap(
                f"{finding.severity.value} {finding.code} {finding.subject}: {finding.message}",
                "",
                "  ",
            ),
            err=err,
            fg=_COLOUR.get(finding.severity.value),
        )
        echo(wrap(f"fix: {finding.fix}", "  ", "    "), err=err)


SHOWN = 12  # the arguments and variables named in the head line; past them, a count


def _looked_at(checked: tuple[str, ...]) -> str:
    """What lint looked at, by name: 'the model, --max-model-len, VLLM_USE_V1'."""
    if not checked:
        return "nothing: no argument and no VLLM_* variable was given"
    return listed(["the model" if c == "MODEL" else c for c in checked], SHOWN)


def lint_report(report: LintReport, where: str, as_json: bool) -> None:
    if as_json:
        data = report.to_dict()
        data["source"] = where
        emit_json(data)
        return
    head = f"{report.profile} (vLLM {report.vllm}): checked {_looked_at(report.checked)}"
    echo(wrap(head + (f" from {where}" if where else ""), "", "  "))
    lint_lines(report.findings)
    if report.ok:
        seen = " (see the warnings)" if report.findings else ""
        echo(
            wrap(
                f"ok: vLLM {report.vllm} has every flag given, each with as many values as it "
                f"takes{seen}. What a value says is not checked.",
                "",
                "  ",
            ),
            fg="green",
        )
