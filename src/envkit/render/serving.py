"""What `plan`, `probe`, `doctor`, `explain` and `serve` print."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envkit.render.term import (
    cut_left,
    echo,
    echo_encoded,
    emit_json,
    finding_lines,
    interrupted,
    live_line,
    note,
    one_line,
    table,
    term_width,
    wrap,
)
from envkit.wording import agree, counted

if TYPE_CHECKING:  # the results' types; importing every core module would slow each command
    from envkit.env.doctor import Diagnosis
    from envkit.models.check_model import Verdict
    from envkit.serving.explain.causes import Cause, Explanation
    from envkit.serving.explain.logdiff import LogDiff
    from envkit.serving.plan.memory_plan import Plan
    from envkit.serving.run.launch import Launch
    from envkit.serving.run.probe import ProbeResult
    from envkit.serving.run.serve import ServeResult


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

    assumed = " (assumed: no --free)" if num.free_assumed else ""
    echo(f"GPU: {mem.total / GIB:.2f} GiB total, {mem.free / GIB:.2f} GiB free{assumed}")
    # one table, the utilisation asked beside the recommended one: every number says which
    # when no setting fits there is nothing to recommend: the column is the best one tried
    best = "RECOMMENDED" if rec.max_model_len else "BEST TRIED"
    rows = [
        ("", "AS ASKED", best, "HOW"),
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
    if mm := result.mm:
        per_prompt = (
            f"{mm.items_per_prompt} per prompt (--limit-mm-per-prompt)"
            if mm.items_per_prompt is not None
            else "vLLM's 999 per prompt"
        )
        asked = (
            f"--mm-processor-kwargs max_pixels {mm.asked_max_pixels}"
            if mm.asked_max_pixels != mm.max_pixels
            else f"the model's {mm.max_pixels} pixels ({mm.source})"
        )
        rows.insert(
            5,
            (
                "image profiling",
                gib(mem.mm_profile),
                gib(mem.recommended_mm_profile),
                f"{mm.profiled_items_asked} | {mm.profiled_items} images at once (the encoder "
                f"budget, {mm.encoder_budget} tokens, over an image's; {per_prompt}): their "
                "embeddings and vision activations, estimated",
            ),
        )
        rows.append(
            (
                "images",
                f"{mm.asked_max_pixels // mm.pixels_per_token} tokens",
                f"{mm.recommended_max_pixels // mm.pixels_per_token} tokens",
                f"per image at most: as asked {asked}; recommended max_pixels "
                f"{mm.recommended_max_pixels}",
            )
        )
    echo(table(rows))
    finding_lines(result.problems[shown:])
    for said in result.notes:
        echo(wrap(f"note: {said}", "  ", "    "))
    judged = result.result  # the verdict line: its result's message
    echo(one_line(judged.message), fg=_SEVERITY[judged.severity.value], bold=True)
    if result.command:
        echo("recommended: " + one_line(result.command))
    if compose:
        echo_encoded(compose, nl=False)  # its values redacted before quoting


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
    for said in result.notes:
        echo(wrap(f"note: {said}", "", "  "))
    verdict = result.result
    echo(one_line(verdict.message), fg=_SEVERITY[verdict.severity.value], bold=True)


_SEVERITY = {
    "error": "red",
    "unknown": "magenta",
    "warning": "yellow",
    "info": "blue",
    "ok": "green",
}


def _mib(size: int | None) -> str:
    return str(size // 1024**2) if size is not None else "?"


def diagnosis(d: Diagnosis, as_json: bool) -> None:
    if as_json:
        emit_json(d.to_dict())
        return
    kind = "venv" if d.venv else "system interpreter"
    echo(cut_left(f"python {d.python} ({kind} {d.prefix})", term_width()))
    for gpu in d.gpus:
        echo(
            one_line(
                f"gpu {gpu.name}: driver {gpu.driver}, compute capability "
                f"{gpu.capability}, {_mib(gpu.free)} of {_mib(gpu.memory)} MiB free"
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
    errors = sum(1 for f in d.findings if f.failed)
    if errors:
        echo(f"{counted(errors, 'error')} found.", fg="red", bold=True)
    else:
        echo("No errors found.", fg="green", bold=True)


def _cause(cause: Cause, title: str) -> None:
    """A cause drawn from its result (``Cause.result``: code, severity, subject, message,
    evidence, fix), with what the explanation adds beside it (``count``, ``meaning``,
    ``details``, ``next``)."""
    r = cause.result
    where = f" ({r.subject})" if r.subject else ""
    echo(f"{title}: ", bold=True, nl=False)
    echo(f"{r.code}{where}", fg="green" if r.severity.value == "ok" else "red", bold=True)
    echo(wrap(r.message, "  ", "  "))
    for line in r.evidence:
        echo(wrap(line, "    > ", "      "))
    if cause.count > len(r.evidence):
        echo(f"    ... {counted(cause.count - len(r.evidence), 'more line')} read so")
    if cause.meaning:
        echo(wrap(f"means: {cause.meaning}", "  ", "    "))
    for step in r.steps:
        echo(wrap(f"fix: {step}", "  ", "    "))
    for detail in cause.details:
        echo(wrap(f"from: {detail}", "  ", "    "))
    for command in cause.next:
        echo(wrap(f"next: {command}", "  ", "    "))


# an environment check's result (``Check.result``) in words
_VERDICT = {"ok": "matches", "error": "differs", "unknown": "not said"}


def explanation(result: Explanation, as_json: bool) -> None:
    if as_json:
        emit_json(result.to_dict())
        return
    facts = result.facts
    said = [f"vLLM {facts.vllm_version}" if facts.vllm_version else "", facts.model]
    echo(cut_left(f"log {result.source}: {counted(result.stats.lines, 'line')}", term_width()),
         nl=False)  # fmt: skip
    echo(f"; {', '.join(s for s in said if s)}" if any(said) else "")
    if result.stats.cut:
        cut = result.stats.cut
        echo(f"  ({counted(cut, 'line')} longer than 64 KiB {agree(cut, 'was', 'were')} cut)")
    _cause(result.cause, "cause")
    for other in result.also:
        _cause(other, "also")
    if result.environment:
        env = result.environment
        echo(f"environment: {env.source}", bold=True)
        for check in (c.result for c in env.checks):
            echo(f"  {check.message}: {_VERDICT[check.severity.value]}")
        for n in env.notes:
            echo(wrap(n, "  ", "    "))
    verdict, colour = {
        "healthy": ("vLLM started.", "green"),
        "incomplete": ("The log ends before vLLM started or failed.", "yellow"),
        "not-vllm": ("This is not vLLM's log.", "yellow"),
    }.get(result.status.value, ("vLLM did not start.", "red"))
    echo(verdict, fg=colour, bold=True)


def log_diff(d: LogDiff, as_json: bool) -> None:
    if as_json:
        emit_json(d.to_dict())
        return
    echo(f"a: {d.a}: {d.cause_a.code.value}; b: {d.b}: {d.cause_b.code.value}")
    for kind, changes in (("environment", d.changed_env), ("arguments", d.changed_args)):
        for c in changes:
            echo(
                f"changed {kind}: {c.name}: {c.a if c.a is not None else '(unset)'} in a, "
                f"{c.b if c.b is not None else '(unset)'} in b"
            )
    if not d.changed_env and not d.changed_args:
        echo("no variable or argument differs in vLLM's dumps")
    said = {
        "named": "a line names it",
        "unknown-to-vllm": "vLLM says it does not know it",
        "path-changed": "no line names it, but the two runs differ",
        "not-acknowledged": "no line names it and the two runs took the same path",
    }
    for ack in d.acknowledged:
        echo(wrap(f"{ack.name}: {ack.verdict}: {said[ack.verdict]}", "", "  "))
        for e in ack.evidence:
            echo(wrap(f"{e.side}:{e.line}: {e.text}", "    > ", "      "))
        if ack.note:
            echo(wrap(ack.note, "  ", "  "))
    for side, lines, count in (("a", d.only_in_a, d.counts[0]), ("b", d.only_in_b, d.counts[1])):
        if count:
            echo(f"only in {side}: {counted(count, 'line')}")
            for e in lines:
                echo(wrap(f"{e.line}: {e.text}", "    > ", "      "))
    echo(
        "the failure is the same" if d.same_failure else "the outcome changed",
        bold=True,
        fg="red" if d.same_failure else "green",
    )


def serve_start(launch: Launch) -> None:
    """What serve is about to run, and why so (on stderr: stdout carries vLLM's log)."""
    for warning in launch.warnings:
        echo("envkit: warning: ", err=True, fg="yellow", nl=False)
        echo(warning, err=True)
    for text in launch.notes:
        note(text)
    from envkit.serving.run.launch import printable

    note(f"running {printable(launch.shown)}")


class ServeLog:
    """vLLM's log as it comes, as it is (masked): stdout, or stderr when --json keeps stdout
    for the document. Lines as a terminal shows them (``io.pieces.Screen``); a progress bar
    is drawn live over itself on a terminal, and on a pipe comes once, in its last state."""

    def __init__(self, as_json: bool) -> None:
        self.err = as_json
        self.drawn = False

    def output(self, text: str) -> None:
        if self.drawn:
            live_line("", err=self.err)
            self.drawn = False
        echo(text, nl=False, err=self.err)

    def progress(self, text: str) -> None:
        self.drawn = live_line(text, err=self.err) or self.drawn


def serve_ready(result: ProbeResult) -> None:
    chat = result.chat
    took = f" in {chat.seconds:.2f} s" if chat else ""
    echo(
        f"envkit: ready: {result.base} lists {', '.join(result.models) or 'no model'}; "
        f"a 16-token chat answered{took}",
        err=True,
        fg="green",
        bold=True,
    )


def _stopped(result: ServeResult) -> str:
    stop = result.stopped
    if stop.left:
        pids = " ".join(map(str, stop.left))
        return (
            f"processes {pids} that vLLM started are STILL RUNNING after {stop.signal} "
            f"(kill -9 {pids})"
        )
    if not stop.signal:
        return "vLLM had exited; nothing of it is left running"
    return (
        f"{stop.signal} to vLLM ({result.pid}) and every process it started, gone after "
        f"{stop.seconds:.1f} s; nothing of it is left running"
    )


def serve_result(result: ServeResult, as_json: bool) -> None:
    outcome = result.outcome.value
    if as_json:
        emit_json(result.to_dict())
    else:
        if result.explanation is not None:
            _cause(result.explanation.cause, "cause")
            for other in result.explanation.also:
                _cause(other, "also")
        if result.probe is not None and not result.probe.ok:
            probe(result.probe, False)
        if outcome != "interrupted":
            good = result.exit_code == 0
            echo(
                f"{'vLLM serves' if good else 'vLLM did not serve'}: {result.reason}.",
                fg="green" if good else "red",
                bold=True,
            )
            echo(wrap(f"{_stopped(result)}. log: {result.log}", "", "  "))
    if outcome == "interrupted":
        interrupted(False, f"{result.reason}; {_stopped(result)}. log: {result.log}")
