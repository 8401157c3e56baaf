"""How plan, serve and explain use ``envkit lint``'s check (``serving.lint.check``).

A network failure is never a verdict: the check is then skipped and said so, and what it would
have refused is left to vLLM. ``serve`` refuses to start vLLM on an error finding (but
``unreadable-release``: envkit not reading a parser is no fault of the arguments).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from envkit.errors import NetworkError, ServeRefused
from envkit.index.session import IndexSession
from envkit.profiles.profile import Profile
from envkit.serving.lint.check import LintReport, lint_args


def lint_notes(
    profile: Profile,
    args: Sequence[str],
    env: Mapping[str, str] = {},
    *,
    session: IndexSession | None = None,
    what: str = "the arguments",
) -> tuple[LintReport | None, list[str]]:
    """The report on ``args`` (None when the index did not answer) and one line per finding,
    for a command's notes."""
    try:
        report = lint_args(profile, args, env, session=session)
    except NetworkError as exc:
        return None, [f"lint: {what} not checked against vLLM's parser ({exc.message})"]
    return report, [
        f"lint: {f.severity.value} {f.code} {f.subject}: {f.message} (fix: {f.fix})"
        for f in report.findings
    ]


def refuse_on_error(report: LintReport | None, profile: Profile) -> None:
    """ServeRefused (exit 1) when vLLM would refuse the arguments."""
    if report is None:
        return
    errors = [f for f in report.errors if f.code != "unreadable-release"]
    if errors:
        raise ServeRefused(
            f"vLLM {report.vllm} ({profile.name}) would refuse these arguments: "
            + "; ".join(f"{f.subject}: {f.message}" for f in errors),
            " ".join(f.fix for f in errors) + " envkit lint shows the check on its own.",
        )


def args_from_log(recorded: Mapping[str, str]) -> list[str]:
    """vllm serve words from a log's recorded arguments (``non-default args``, a command
    line): ``max_model_len: 8192`` -> ``--max-model-len 8192``; the model first."""
    words: list[str] = []
    model = recorded.get("model_tag") or recorded.get("model") or ""  # vLLM copies one to model
    for key, value in recorded.items():
        if key in ("model_tag", "model"):
            continue
        if value in ("false", "False"):
            continue
        words.append("--" + key.replace("_", "-"))
        if value not in ("true", "True"):
            words.append(value)
    return [model, *words] if model else words
