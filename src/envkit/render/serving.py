"""What `plan`, `probe` and `doctor` print."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envkit.render.term import (
    cut_left,
    echo,
    emit_json,
    finding_lines,
    one_line,
    table,
    term_width,
    wrap,
)

if TYPE_CHECKING:  # the results' types; importing every core module would slow each command
    from envkit.env.doctor import Diagnosis
    from envkit.models.check_model import Verdict
    from envkit.serving.memory_plan import Plan
    from envkit.serving.probe import ProbeResult


def plan(result: Plan, verdict: Verdict, compose: str, as_json: bool) -> None:
    if as_json:
        data = result.to_dict()
        data["profile"] = verdict.to_dict()
        if compose:
            data["compose"] = compose
        emit_json(data)
        return
    from envkit.gpu.cards import GIB

    shown = 0
    if not verdict.ok:  # the reasons first: no memory setting fixes them
        echo(f"{verdict.profile} cannot load this model:", fg="red", bold=True)
        finding_lines(verdict.problems)
        shown = len(verdict.problems)  # they lead result.problems too
    mem = result.memory
    rec = result.recommended.gpu_memory_utilization
    # every line at the recommended utilisation; the problems below speak of the one asked
    rows = [
        ("GPU", f"{mem.total / GIB:.2f} GiB total, {mem.free / GIB:.2f} GiB free"),
        ("vLLM asks", f"{mem.recommended_requested / GIB:.2f} GiB (utilisation {rec:.2f})"),
        ("weights", f"{mem.weights / GIB:.2f} GiB ({result.numbers.weights_source})"),
        ("reserve", f"{mem.reserve / GIB:.2f} GiB (activations, CUDA graphs)"),
        (
            "KV cache",
            f"{mem.recommended_kv_cache / GIB:.2f} GiB, {mem.kv_per_token} bytes per token "
            f"({result.numbers.full_attention_layers} attention layers)",
        ),
        (
            "context",
            f"{result.numbers.max_model_len} asked, "
            f"{result.numbers.max_model_len_that_fits} fit at the recommendation",
        ),
    ]
    if result.mm:
        rows.append(
            (
                "images",
                f"{result.mm.max_image_tokens} tokens per image at most "
                f"({result.mm.max_pixels} pixels, {result.mm.source})",
            )
        )
    echo(table(rows))
    finding_lines(result.problems[shown:])
    for note in result.notes:
        echo(wrap(f"note: {note}", "  ", "    "))
    if not verdict.ok:
        echo("No command: the profile cannot load this model.", fg="red", bold=True)
    elif result.ok:
        echo("It fits as asked.", fg="green", bold=True)
    else:
        echo("It does not fit as asked.", fg="red", bold=True)
    if result.command:
        echo("recommended: " + one_line(result.command))
    if compose:
        echo(compose, nl=False)


def probe(result: ProbeResult, as_json: bool) -> None:
    if as_json:
        emit_json(result.to_dict())
        return
    for answer in result.tried:
        status = str(answer.status) if answer.status else "no answer"
        url = answer.url if answer.url.endswith("/models") else answer.url + "/models"
        echo(one_line(f"GET {url}: {status}"))
        if answer.problem:
            echo(wrap(answer.problem, "  ", "  "))
    if result.models:
        echo(one_line(f"models: {', '.join(result.models)}"))
    if result.chat is not None:
        echo(
            one_line(
                f"POST {result.chat.url}: {result.chat.status or 'no answer'}"
                f" in {result.chat.seconds:.2f} s"
            )
        )
        if result.chat.problem:
            echo(wrap(result.chat.problem, "  ", "  "))
    for note in result.notes:
        echo(wrap(f"note: {note}", "", "  "))
    if result.ok:
        echo(one_line(f"The server answers at {result.base}."), fg="green", bold=True)
    else:
        echo("The server does not answer as an OpenAI-compatible API.", fg="red", bold=True)


_SEVERITY = {"error": "red", "warning": "yellow", "info": "blue"}


def diagnosis(d: Diagnosis, as_json: bool) -> None:
    if as_json:
        emit_json(d.to_dict())
        return
    kind = "venv" if d.venv else "system interpreter"
    echo(cut_left(f"python {d.python} ({kind} {d.prefix})", term_width()))
    for gpu in d.gpus:
        echo(
            one_line(
                f"gpu {gpu['name']}: driver {gpu['driver']}, compute capability "
                f"{gpu['compute_capability']}, {gpu['memory_free_mib']} of "
                f"{gpu['memory_total_mib']} MiB free"
            )
        )
    for f in d.findings:
        echo(f"{f.severity.value:<7} ", fg=_SEVERITY.get(f.severity.value), nl=False)
        echo(wrap(f"{f.code}: {f.message}", "", "        "))
        if f.fix:
            echo(wrap(f"fix: {f.fix}", "        ", "          "))
    if d.environment:
        shown = ", ".join(f"{k}={v}" for k, v in d.environment.items())
        echo(wrap(f"environment: {shown}", "", "  "))
    errors = sum(1 for f in d.findings if f.severity == "error")
    if errors:
        echo(f"{errors} error(s) found.", fg="red", bold=True)
    else:
        echo("No errors found.", fg="green", bold=True)
