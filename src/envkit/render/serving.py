"""What `plan`, `probe` and `doctor` print."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envkit.render.term import cut_left, echo, emit_json, finding_lines, table, term_width, wrap

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
    mem, num, rec = result.memory, result.numbers, result.recommended

    def gib(n: int) -> str:
        return f"{n / GIB:.2f} GiB" if n > 0 else "none"

    echo(f"GPU: {mem.total / GIB:.2f} GiB total, {mem.free / GIB:.2f} GiB free")
    # one table, the utilisation asked beside the recommended one: every number says which
    rows = [
        ("", "AS ASKED", "RECOMMENDED", "HOW"),
        (
            "utilisation",
            f"{mem.requested / mem.total:.2f}",
            f"{rec.gpu_memory_utilization:.2f}",
            f"the most that starts: {num.highest_safe_utilization:.2f} (free share less 1 point)",
        ),
        ("vLLM asks", gib(mem.requested), gib(mem.recommended_requested),
         "utilisation x total; vLLM refuses to start when more than is free"),
        ("weights", gib(mem.weights), gib(mem.weights), num.weights_source),
        ("reserve", gib(mem.reserve), gib(mem.reserve), "activations, CUDA graphs (--reserve)"),
        ("KV cache", gib(mem.kv_cache), gib(mem.recommended_kv_cache),
         f"what is left; {mem.kv_per_token} bytes per token ({num.full_attention_layers} "
         "attention layers)"),
        ("context", f"{num.max_model_len} tokens", f"{rec.max_model_len} tokens",
         num.max_model_len_source),
        ("KV cache holds", f"{num.max_model_len_that_fits_asked} tokens",
         f"{num.max_model_len_that_fits} tokens", "in vLLM's blocks of 16 tokens"),
        ("requests at once", f"{num.concurrency_asked:g}", f"{num.concurrency:g}",
         "full-length requests the KV cache holds together"),
    ]  # fmt: skip
    if result.mm:
        rows.append(
            (
                "images",
                f"{result.mm.max_image_tokens} tokens",
                f"{result.mm.recommended_max_pixels // result.mm.pixels_per_token} tokens",
                f"per image at most: {result.mm.max_pixels} pixels ({result.mm.source}); "
                f"recommended max_pixels {result.mm.recommended_max_pixels}",
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
        echo("recommended: " + result.command)
    if compose:
        echo(compose, nl=False)


def probe(result: ProbeResult, as_json: bool) -> None:
    if as_json:
        emit_json(result.to_dict())
        return
    for answer in result.tried:
        status = str(answer.status) if answer.status else "no answer"
        echo(
            f"GET {answer.url}/models: {status}"
            if not answer.url.endswith("/models")
            else f"GET {answer.url}: {status}"
        )
        if answer.problem:
            echo(wrap(answer.problem, "  ", "  "))
    if result.models:
        echo(f"models: {', '.join(result.models)}")
    if result.chat is not None:
        echo(
            f"POST {result.chat.url}: {result.chat.status or 'no answer'}"
            f" in {result.chat.seconds:.2f} s"
        )
        if result.chat.problem:
            echo(wrap(result.chat.problem, "  ", "  "))
    for note in result.notes:
        echo(wrap(f"note: {note}", "", "  "))
    if result.ok:
        echo(f"The server answers at {result.base}.", fg="green", bold=True)
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
            f"gpu {gpu['name']}: driver {gpu['driver']}, compute capability "
            f"{gpu['compute_capability']}, {gpu['memory_free_mib']} of "
            f"{gpu['memory_total_mib']} MiB free"
        )
    for f in d.findings:
        echo(f"{f.severity.value:<7} ", fg=_SEVERITY.get(f.severity.value), nl=False)
        echo(wrap(f"{f.code}: {f.message}", "", "        "))
        if f.fix:
            echo(wrap(f"fix: {f.fix}", "        ", "          "))
    if d.environment:
        echo("environment: " + ", ".join(f"{k}={v}" for k, v in d.environment.items()))
    errors = sum(1 for f in d.findings if f.severity == "error")
    if errors:
        echo(f"{errors} error(s) found.", fg="red", bold=True)
    else:
        echo("No errors found.", fg="green", bold=True)
