"""The one module that prints: text for people, JSON for programs.

Results go to stdout; progress, notes and errors to stderr (with ``--json``, an error is also
a JSON object on stdout, so a program always gets one document). Text output fits the
terminal: long cells are shortened, never wrapped into a mess.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from .errors import EXIT_CODES, EnvkitError
from .redaction import redact

if TYPE_CHECKING:  # the results' types; importing every core module would slow each command
    from .build import BuildResult
    from .catalog import ProfileListing
    from .compat import CompatReport
    from .doctor import Diagnosis
    from .findings import Finding
    from .history import History
    from .lockcells import CellState
    from .modelcheck import ModelReport, Verdict
    from .plan import Plan
    from .profile import Profile
    from .registry_scan import Scan
    from .serverprobe import ProbeResult
    from .sitebuild import SiteResult
    from .solver import Solution
    from .verify import Report

JSON_VERSION = 1


WIDE = False  # --wide: nothing is shortened or folded to the terminal's width


def set_wide(wide: bool) -> None:
    global WIDE
    WIDE = wide


def _colour() -> bool | None:
    """NO_COLOR (no-color.org) wins, then FORCE_COLOR; else colour only on a terminal."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return None


def _echo(text: str = "", *, err: bool = False, nl: bool = True, **style: Any) -> None:
    """Every line envkit prints passes here: credentials in URLs never reach the output."""
    text = redact(text)
    click.echo(click.style(text, **style) if style else text, err=err, nl=nl, color=_colour())


def _width() -> int:
    if WIDE:
        return 10_000
    return max(60, shutil.get_terminal_size((100, 24)).columns)


def _cut(text: str, width: int) -> str:
    if WIDE:
        return text
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def _wrap(text: str, first: str, rest: str) -> str:
    """A paragraph folded to the terminal's width (messages people must read in full)."""
    return textwrap.fill(
        text,
        _width(),
        initial_indent=first,
        subsequent_indent=rest,
        break_on_hyphens=False,
        break_long_words=False,
    )


def _cut_left(text: str, width: int) -> str:
    """Shorten from the left: the end of a path is the part that tells."""
    if WIDE:
        return text
    return text if len(text) <= width else "…" + text[len(text) - width + 1 :]


def table(rows: Sequence[Sequence[str]]) -> str:
    """Columns sized to their content; the last one folded onto more lines to fit the
    terminal (never cut: every word stays)."""
    if not rows:
        return ""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    used = sum(w + 2 for w in widths[:-1])
    room = max(20, _width() - used)
    out = []
    for row in rows:
        cells = [c.ljust(widths[i]) for i, c in enumerate(row[:-1])]
        lines = textwrap.wrap(row[-1], room, break_on_hyphens=False) or [""]
        out.append(("  ".join([*cells, lines[0]])).rstrip())
        out += [" " * used + line for line in lines[1:]]
    return "\n".join(out)


def emit_json(data: dict[str, Any]) -> None:
    _echo(json.dumps({"envkit": JSON_VERSION, **data}, indent=2, sort_keys=False))


def progress(message: str) -> None:
    """A step of long work, shown on a terminal only: piped output stays what was asked."""
    if sys.stderr.isatty():
        _echo(f"envkit: {message}", err=True, dim=True)


def note(message: str) -> None:
    """Something done or met on the way that the user must learn of (recovery, waiting),
    shown whether or not stderr is a terminal."""
    _echo(f"envkit: {message}", err=True, dim=True)


def error(exc: EnvkitError, as_json: bool) -> None:
    if as_json:
        emit_json({"ok": False, "exit_code": exc.exit_code, **exc.to_dict()})
    _echo("error: ", err=True, fg="red", bold=True, nl=False)
    _echo(str(exc), err=True)


def broken_profiles(errors: Sequence[EnvkitError]) -> None:
    """Profiles that could not be read, named on stderr while a command goes on without them."""
    for err in errors:
        _echo("skipped a broken profile: ", err=True, fg="yellow", nl=False)
        _echo(err.message, err=True)


def interrupted(as_json: bool, state: str = "") -> None:
    """The last line of an interrupted run: what it says about the files must be true, so
    commands that change something hand over what they left (``state``)."""
    text = f"Interrupted. {state}" if state else "Interrupted."
    if as_json:
        emit_json({"ok": False, "exit_code": 130, "error": "Interrupted", "message": text})
    _echo(f"envkit: {text}", err=True, fg="yellow")


def usage_error(message: str, as_json: bool) -> None:
    if as_json:
        emit_json({"ok": False, "exit_code": 2, "error": "UsageError", "message": message})
    _echo("error: ", err=True, fg="red", bold=True, nl=False)
    _echo(f"{message} (envkit --help shows the commands and options)", err=True)


def profiles(listing: ProfileListing, as_json: bool) -> None:
    if as_json:
        emit_json(
            {
                "ok": not listing.errors,
                "folder": str(listing.folder),
                "profiles": [
                    {
                        "name": p.name,
                        "path": str(p.path),
                        "description": p.description,
                        "python": p.python,
                        "backend": p.torch.backend or None,
                        "requirements": list(p.requirements),
                    }
                    for p in listing.profiles
                ],
                "invalid": [e.to_dict() for e in listing.errors],
            }
        )
        return
    rows = [("NAME", "PYTHON", "TORCH", "DESCRIPTION")]
    rows += [
        (p.name, p.python, p.torch.backend or "-", p.description.split("\n")[0])
        for p in listing.profiles
    ]
    _echo(table(rows))
    if not listing.profiles:
        _echo(f"(no valid profiles in {listing.folder})")
    for err in listing.errors:
        _echo("invalid: ", err=True, fg="red", nl=False)
        _echo(str(err), err=True)


def show(profile: Profile, as_json: bool) -> None:
    data = profile.to_dict()
    if as_json:
        emit_json({"ok": True, "profile": data})
        return
    rows = [
        ("profile", profile.name),
        ("file", str(profile.path)),
        ("python", profile.python),
        ("torch backend", profile.torch.backend or "-"),
        ("torch CUDA", profile.torch.cuda or "-"),
        ("requirements", ", ".join(profile.requirements)),
        ("constraints", ", ".join(profile.constraints) or "-"),
        ("exclude newer", profile.exclude_newer or "-"),
        ("verify versions", ", ".join(f"{k}=={v}" for k, v in data["verify"]["versions"].items())),
        ("verify imports", ", ".join(profile.checks.imports) or "-"),
        ("verify probes", ", ".join(profile.checks.probes) or "-"),
        ("model types", ", ".join(profile.models.model_types) or "-"),
        ("architectures", ", ".join(profile.models.architectures) or "-"),
    ]
    if profile.description:
        _echo(profile.description.strip())
        _echo()
    _echo(table(rows))


_MARK = {  # by verify.Status value
    "pass": ("ok", "green"),
    "warn": ("warn", "yellow"),
    "fail": ("FAIL", "red"),
}


def report(rep: Report, as_json: bool) -> None:
    if as_json:
        emit_json(rep.to_dict())
        return
    _report_text(rep)


def _report_text(rep: Report) -> None:
    width = _width()
    venv = str(rep.venv)
    _echo(_cut_left(f"profile {rep.profile}  python {rep.python}  venv {venv}", width))
    name_w = min(max((len(c.name) for c in rep.checks), default=10), 30)
    for check in rep.checks:
        mark, colour = _MARK[check.status.value]
        found = check.found
        if found.startswith(venv + "/"):
            found = rep.venv.name + found[len(venv) :]
        if check.status.value != "pass" and check.expected:
            found = f"{found} (want {check.expected})"
        lead = f"  {mark:<4}  {check.kind:<11}  {_cut(check.name, name_w):<{name_w}}  "
        rest = (
            _cut_left(found, width - len(lead))
            if found.startswith("/")
            else _cut(found, width - len(lead))
        )
        _echo(click.style(lead[:6], fg=colour) + lead[6:] + rest)
        if check.detail and check.status.value != "pass":
            _echo(_wrap(check.detail, "        ", "        "))
        if check.fix:
            _echo(_wrap(f"fix: {check.fix}", "        ", "             "))
    failed = len(rep.failures)
    if failed:
        _echo(f"{failed} of {len(rep.checks)} checks failed.", fg="red", bold=True)
    else:
        _echo(f"All {len(rep.checks)} checks hold.", fg="green", bold=True)


def build(result: BuildResult, as_json: bool) -> None:
    if as_json:
        emit_json(result.to_dict())
        return
    if result.report is not None:
        _report_text(result.report)
    timing = ", ".join(f"{k} {v:.1f} s" for k, v in result.seconds.items())
    if result.ok:
        verb = "replaced the previous environment" if result.replaced else "created it"
        _echo(f"Built {result.profile} into {result.venv}: {verb} ({timing}).", fg="green")
    else:
        _echo(
            f"Build of {result.profile} failed verification; {result.venv} was left as it was.",
            fg="red",
            err=True,
        )


def exit_codes_help() -> str:
    return "\n".join(f"  {code:>3}  {text}" for code, text in EXIT_CODES.items())


def _columns(items: Sequence[str], indent: int = 2) -> str:
    """Names laid out in as many columns as the terminal holds."""
    if not items:
        return " " * indent + "(none)"
    width = max(len(i) for i in items) + 2
    per_line = max(1, (_width() - indent) // width)
    lines = []
    for start in range(0, len(items), per_line):
        row = items[start : start + per_line]
        lines.append(" " * indent + "".join(i.ljust(width) for i in row).rstrip())
    return "\n".join(lines)


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return str(n)


def scans(results: Sequence[Scan], as_json: bool, updated: str = "") -> None:
    if as_json:
        data: dict[str, Any] = {"ok": True}
        if len(results) == 1:
            data.update(results[0].to_dict())
        else:
            data["scans"] = [r.to_dict() for r in results]
        if updated:
            data["updated"] = updated
        emit_json(data)
        return
    for scan in results:
        share = scan.bytes_read / scan.wheel_bytes * 100 if scan.wheel_bytes else 0.0
        how = (
            "from the cache"
            if scan.cached
            else (
                f"read {_size(scan.bytes_read)} of {_size(scan.wheel_bytes)} ({share:.2f}%) "
                f"in {scan.requests} requests, {scan.seconds:.2f} s"
            )
        )
        _echo(f"{scan.project} {scan.version}  ({scan.wheel}, {how})", bold=True)
        reqs = ", ".join(f"{k}{v}" for k, v in sorted(scan.requires.items()))
        _echo(f"requires: Python {scan.requires_python or 'any'}; {reqs or 'nothing pinned'}")
        if scan.project == "vllm":
            _echo(f"architectures in the model registry ({len(scan.architectures)}):")
            _echo(_columns(scan.architectures))
            _echo(f"model types with vLLM's own config class ({len(scan.model_types)}):")
            _echo(_columns(scan.model_types))
            if scan.previously_supported:
                _echo(
                    f"dropped architectures ({len(scan.previously_supported)}): "
                    + ", ".join(
                        f"{k} (until {v})" for k, v in sorted(scan.previously_supported.items())
                    )
                )
        else:
            _echo(f"model types AutoConfig knows ({len(scan.model_types)}):")
            _echo(_columns(scan.model_types))
    if updated:
        _echo(f"Updated [models] in {updated}.", fg="green")


def model_report(rep: ModelReport, as_json: bool) -> None:
    if as_json:
        emit_json(rep.to_dict())
        return
    cfg = rep.config
    _echo(_cut_left(f"model {cfg.source}", _width()))
    _echo(
        f"  model_type {cfg.model_type}; architectures {', '.join(cfg.architectures) or '-'}"
        + ("; ships remote code (auto_map)" if cfg.remote_code else "")
    )
    shown = [rep.verdict] if rep.verdict is not None else list(rep.verdicts)
    for verdict in shown:
        mark, colour = ("can load", "green") if verdict.ok else ("CANNOT load", "red")
        using = f" with {verdict.architecture}" if verdict.ok else ""
        _echo(f"{verdict.profile}: ", nl=False, bold=True)
        _echo(f"{mark} it{using}", fg=colour)
        for problem in verdict.problems:
            _echo(_wrap(f"{problem.code}: {problem.message}", "  ", "    "))
            if problem.fix:
                _echo(_wrap(f"fix: {problem.fix}", "    ", "      "))
        for note in verdict.notes:
            _echo(_wrap(f"note: {note}", "  ", "    "))
    if rep.verdict is not None or not rep.ok:
        names = ", ".join(rep.supported_by)
        _echo(f"supported by: {names or 'no shipped profile'}")
    if rep.releases is not None and rep.releases.listed:
        rel = rep.releases
        _echo(
            _wrap(
                f"{rel.architecture} is listed by vLLM {rel.first} through {rel.newest} (newest "
                f"release {rel.latest_release}); draft a profile with: envkit new-profile NAME "
                f"--for-model {cfg.source}",
                "",
                "  ",
            )
        )
    if rep.releases is not None and rep.releases.plugin:
        _echo(
            _wrap(
                f"{rep.releases.architecture} has moved out of vLLM to a plugin: "
                f"{rep.releases.plugin}",
                "",
                "  ",
            )
        )
    elif rep.lookup:
        _echo(rep.lookup)


def histories(model: str | None, found: Sequence[History], as_json: bool) -> None:
    if as_json:
        emit_json(
            {
                "ok": any(h.listed for h in found),
                "model": model,
                "architectures": [h.to_dict() for h in found],
            }
        )
        return
    for h in found:
        data = h.to_dict()
        _echo(f"{h.architecture}", bold=True, nl=False)
        if data["first"]:
            _echo(f": vLLM {data['first']} through {data['newest']}", nl=False)
        else:
            _echo(": listed by no published vLLM release", nl=False)
        _echo(f" ({len(h.releases)} releases read)")
        runs: list[list[Any]] = []  # [first, last, presence, transformers, note]
        for r in h.releases:
            bound = f"vLLM's tests: {r.bound.describe()}" if r.bound else ""
            key = (r.presence.value, r.transformers, "; ".join(n for n in (r.note, bound) if n))
            if runs and tuple(runs[-1][2:]) == key:
                runs[-1][1] = r.version
            else:
                runs.append([r.version, r.version, *key])
        rows = [("RELEASES", "STATE", "TRANSFORMERS", "NOTE")]
        rows += [
            (first if first == last else f"{first} … {last}", state, tf or "-", note)
            for first, last, state, tf, note in runs
        ]
        _echo(table(rows))
        if data["gaps"]:
            _echo(f"  gaps: {', '.join(data['gaps'])}")
        if data["plugin"]:
            _echo(_wrap(f"moved to a plugin: {data['plugin']}", "  ", "    "))
        profiles = ", ".join(h.profiles) or "none"
        _echo(f"  shipped profiles that load it: {profiles}")


def compat(rep: CompatReport, as_json: bool) -> None:
    if as_json:
        emit_json(rep.to_dict())
        return
    pair = f"vLLM {rep.vllm} + transformers {rep.transformers}"
    core = [f for f in rep.findings if not f.architectures]
    scoped = [f for f in rep.findings if f.architectures]
    if core:
        _echo(f"{pair}: not compatible", fg="red", bold=True)
    else:
        _echo(f"{pair}: compatible", fg="green", bold=True, nl=False)
        broken = sorted({a for f in scoped for a in f.architectures})
        _echo(f", except for {len(broken)} architecture(s) below" if broken else "")
    for f in [*core, *scoped]:
        where = f"{f.file}:{f.line}" + (f" (+{f.places - 1} more)" if f.places > 1 else "")
        origin = f" from {f.module}" if f.module and f.module != f.name else ""
        removed = f", removed in {f.removed_in}" if f.removed_in else ""
        _echo(_wrap(f"{f.code.value}: {f.name}{origin}{removed}", "  ", "    "))
        _echo(_wrap(f"used at {where}", "    ", "      "))
        if f.architectures:
            _echo(_wrap("breaks only: " + ", ".join(f.architectures), "    ", "      "))
    against = f", attributes against transformers {rep.reference}" if rep.reference else ""
    how = (
        "from the cache"
        if rep.cached
        else (f"{_size(rep.bytes_read)} read of {_size(rep.wheel_bytes)} in {rep.seconds:.1f} s")
    )
    _echo(f"  checked {rep.imports_checked} imports{against}; {how}")
    if rep.undecided:
        _echo(
            _wrap("  names not decidable from source in: " + ", ".join(rep.undecided), "", "    ")
        )


def site(result: SiteResult, architectures: int, releases: int, as_json: bool) -> None:
    if as_json:
        emit_json({"ok": True, "architectures": architectures, "releases": releases,
                   **result.to_dict()})  # fmt: skip
        return
    _echo(
        f"Wrote {len(result.files)} files into {result.out}: {architectures} architectures x "
        f"{releases} vLLM releases; the matrix page weighs {_size(result.matrix_bytes)}.",
        fg="green",
    )
    _echo(f"Open {result.out / 'index.html'} in a browser (no server needed).")


def drafted(profile: Profile, found: Solution, driver: str, as_json: bool) -> None:
    if as_json:
        emit_json(
            {
                "ok": True,
                "profile": profile.to_dict(),
                "architecture": found.architecture,
                "solution": {
                    "vllm": found.vllm.version,
                    "transformers": found.transformers.version,
                    "python": found.python,
                    "torch": found.torch or None,
                    "cuda": found.cuda or None,
                    "cuda_source": found.cuda_source or None,
                    "driver_cuda": driver or None,
                    "rejected": list(found.rejected),
                },
            }
        )
        return
    _echo(
        f"Wrote {profile.path}: vLLM {profile.models.vllm}, transformers "
        f"{profile.models.transformers}, Python {profile.python}, torch "
        f"{profile.torch.backend or 'default'}.",
        fg="green",
    )
    if found.cuda_source:
        limit = f"; the driver runs CUDA {driver} at most" if driver else ""
        _echo(_wrap(f"CUDA {found.cuda or '?'} from {found.cuda_source}{limit}", "  ", "    "))
    for line in found.rejected:
        _echo(_wrap(f"rejected {line}", "  ", "    "))
    _echo(f"Review it, then: envkit build {profile.name}")


_STATE_COLOUR = {
    "locked": "green",
    "source-only": "yellow",
    "unresolvable": "red",
    "unreachable": "red",
    "incompatible": "red",
    "stale": "red",
    "missing": "red",
}


def lock_results(results: Sequence[CellState], as_json: bool) -> None:
    if as_json:
        emit_json(
            {
                "ok": all(
                    r.state not in ("unresolvable", "unreachable", "incompatible") for r in results
                ),
                "cells": [r.to_dict() for r in results],
            }
        )
        return
    for r in results:
        _echo(f"{r.cell.profile} / {r.cell.name}: ", nl=False)
        _echo(r.state, fg=_STATE_COLOUR.get(r.state), nl=False)
        _echo(
            f" ({r.seconds:.1f} s)"
            + (f", wrote {', '.join(f.name for f in r.files)}" if r.files else "")
        )
        if r.reason:
            _echo(_wrap(r.reason, "    ", "    "))


def _state_rows(found: Sequence[CellState]) -> None:
    rows = [("PROFILE", "CELL", "STATE", "NOTE")]
    rows += [
        (s.cell.profile, s.cell.name, s.state, s.reason.split(":")[0] if s.reason else "")
        for s in found
    ]
    _echo(table(rows))


def lock_check(found: Sequence[CellState], as_json: bool) -> None:
    bad = [s for s in found if s.state in ("stale", "missing", "unresolvable")]
    if as_json:
        emit_json(
            {
                "ok": not bad,
                "cells": [s.to_dict() for s in found],
                "stale": [f"{s.cell.profile}/{s.cell.name}" for s in bad],
            }
        )
        return
    _state_rows(found)
    if bad:
        _echo(
            f"{len(bad)} of {len(found)} cells are stale, missing or unresolvable:",
            fg="red",
            bold=True,
        )
        for s in bad:
            _echo(_wrap(f"{s.cell.profile}/{s.cell.name}: {s.reason}", "  ", "    "))
    else:
        _echo(f"All {len(found)} cells are current.", fg="green", bold=True)


def matrix(found: Sequence[CellState], as_json: bool) -> None:
    if as_json:
        emit_json({"ok": True, "cells": [s.to_dict() for s in found]})
        return
    _state_rows(found)


def github_matrix(matrix: dict[str, Any]) -> None:
    """The object GitHub Actions takes as strategy.matrix, on one line (for $GITHUB_OUTPUT)."""
    _echo(json.dumps(matrix, separators=(",", ":")))


def published(result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit_json(result)
        return
    _echo(f"Published {len(result['files'])} files and index.json to {result['to']}.", fg="green")


def plan(result: Plan, verdict: Verdict, compose: str, as_json: bool) -> None:
    if as_json:
        data = result.to_dict()
        data["profile"] = verdict.to_dict()
        if compose:
            data["compose"] = compose
        emit_json(data)
        return
    from .plan import GIB  # loaded already: the plan was made

    shown = 0
    if not verdict.ok:  # the reasons first: no memory setting fixes them
        _echo(f"{verdict.profile} cannot load this model:", fg="red", bold=True)
        _findings(verdict.problems)
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
    _echo(table(rows))
    _findings(result.problems[shown:])
    for note in result.notes:
        _echo(_wrap(f"note: {note}", "  ", "    "))
    if not verdict.ok:
        _echo("No command: the profile cannot load this model.", fg="red", bold=True)
    elif result.ok:
        _echo("It fits as asked.", fg="green", bold=True)
    else:
        _echo("It does not fit as asked.", fg="red", bold=True)
    if result.command:
        _echo("recommended: " + result.command)
    if compose:
        _echo(compose, nl=False)


def _findings(found: Sequence[Finding]) -> None:
    for problem in found:
        _echo(_wrap(f"{problem.code}: {problem.message}", "  ", "    "), fg="red")
        if problem.fix:
            _echo(_wrap(f"fix: {problem.fix}", "    ", "      "))


def probe(result: ProbeResult, as_json: bool) -> None:
    if as_json:
        emit_json(result.to_dict())
        return
    for answer in result.tried:
        status = str(answer.status) if answer.status else "no answer"
        _echo(
            f"GET {answer.url}/models: {status}"
            if not answer.url.endswith("/models")
            else f"GET {answer.url}: {status}"
        )
        if answer.problem:
            _echo(_wrap(answer.problem, "  ", "  "))
    if result.models:
        _echo(f"models: {', '.join(result.models)}")
    if result.chat is not None:
        _echo(
            f"POST {result.chat.url}: {result.chat.status or 'no answer'}"
            f" in {result.chat.seconds:.2f} s"
        )
        if result.chat.problem:
            _echo(_wrap(result.chat.problem, "  ", "  "))
    for note in result.notes:
        _echo(_wrap(f"note: {note}", "", "  "))
    if result.ok:
        _echo(f"The server answers at {result.base}.", fg="green", bold=True)
    else:
        _echo("The server does not answer as an OpenAI-compatible API.", fg="red", bold=True)


_SEVERITY = {"error": "red", "warning": "yellow", "info": "blue"}


def diagnosis(d: Diagnosis, as_json: bool) -> None:
    if as_json:
        emit_json(d.to_dict())
        return
    kind = "venv" if d.venv else "system interpreter"
    _echo(_cut_left(f"python {d.python} ({kind} {d.prefix})", _width()))
    for gpu in d.gpus:
        _echo(
            f"gpu {gpu['name']}: driver {gpu['driver']}, compute capability "
            f"{gpu['compute_capability']}, {gpu['memory_free_mib']} of "
            f"{gpu['memory_total_mib']} MiB free"
        )
    for f in d.findings:
        _echo(f"{f.severity.value:<7} ", fg=_SEVERITY.get(f.severity.value), nl=False)
        _echo(_wrap(f"{f.code}: {f.message}", "", "        "))
        if f.fix:
            _echo(_wrap(f"fix: {f.fix}", "        ", "          "))
    if d.environment:
        _echo("environment: " + ", ".join(f"{k}={v}" for k, v in d.environment.items()))
    errors = sum(1 for f in d.findings if f.severity == "error")
    if errors:
        _echo(f"{errors} error(s) found.", fg="red", bold=True)
    else:
        _echo("No errors found.", fg="green", bold=True)
