"""What `profiles`, `show`, `verify` and `build` print."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from envkit.env.checks import KIND
from envkit.render.term import (
    cut,
    cut_left,
    echo,
    emit_json,
    fold,
    one_line,
    table,
    term_width,
    wrap,
)
from envkit.wording import agree, every

if TYPE_CHECKING:  # the results' types; importing every core module would slow each command
    from envkit.env.build import BuildResult
    from envkit.env.checks import Report
    from envkit.gpu.needs import DriverNeed
    from envkit.lock.place import Place
    from envkit.profiles.catalog import ProfileListing
    from envkit.profiles.profile import Profile


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
    echo(table(rows))
    if not listing.profiles:
        echo(one_line(f"(no valid profiles in {listing.folder})"))
    for err in listing.errors:
        echo("invalid: ", err=True, fg="red", nl=False)
        echo(one_line(str(err)), err=True)


def show(profile: Profile, need: DriverNeed | None, driver: str, as_json: bool) -> None:
    """One profile; ``need`` is the driver its torch build needs (None for a CPU build or
    none stated), ``driver`` the line that says so."""
    data = profile.to_dict()
    if as_json:
        emit_json({"ok": True, "profile": data, "driver": need.to_dict() if need else None})
        return
    note = need.compat_note() if need else ""
    rows = [
        ("profile", profile.name),
        ("file", str(profile.path)),
        ("python", profile.python),
        ("torch backend", profile.torch.backend or "-"),
        ("torch CUDA", profile.torch.cuda or "-"),
        ("driver", driver + (f"; {note}" if note else "")),
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
        echo(profile.description.strip())
        echo()
    echo(table(rows))


_MARK = {  # by a result's severity: unknown (no verdict) reads as a warning
    "ok": ("ok", "green"),
    "info": ("ok", "green"),
    "warning": ("warn", "yellow"),
    "unknown": ("warn", "yellow"),
    "error": ("FAIL", "red"),
}


def report(rep: Report, as_json: bool, place: Place | None = None) -> None:
    if as_json:
        located = {"profile_path": str(place.path), "locks": str(place.locks)} if place else {}
        emit_json({**rep.to_dict(), **located})
        return
    if place is not None:
        where(place.path, place.locks)
    report_lines(rep)


def report_lines(rep: Report) -> None:
    width = term_width()
    venv = str(rep.venv)
    echo(wrap(f"profile {rep.profile}  python {rep.python}  venv {venv}", "", "  "))
    side = rep.gpu
    if side is not None and side.capability:
        name = f" ({side.name})" if side.name else ""
        driver = f", driver {side.driver}" if side.driver else ""
        cuda = f"; torch's CUDA {side.torch_cuda}" if side.torch_cuda else ""
        echo(wrap(f"gpu compute capability {side.capability}{name}{driver}, from "
                  f"{side.source}{cuda}", "", "  "))  # fmt: skip
    # a name longer than its column is cut on a terminal (--wide shows it), else kept whole
    name_w = min(max((len(c.subject or c.code) for c in rep.checks), default=10), 30)
    indent = 2 + 4 + 2 + 11 + 2 + name_w + 2
    for check in rep.checks:
        mark, colour = _MARK[check.severity.value]
        holds = check.severity.value in ("ok", "info")
        found = check.fact("found") or check.code
        if found.startswith(venv + "/"):
            found = rep.venv.name + found[len(venv) :]
        if not holds and (expected := check.fact("expected")):
            found = f"{found} (want {expected})"
        kind = KIND.get(check.code, check.code)
        lead = f"  {mark:<4}  {kind:<11}  {cut(check.subject or check.code, name_w):<{name_w}}  "
        room = max(20, width - len(lead))
        rest = [cut_left(found, room)] if found.startswith("/") else fold(found, room)
        if len(rest) > 1:  # the first piece beside the name, the rest folded below it
            rest = [rest[0], *fold(" ".join(rest[1:]), max(20, width - indent))]
        echo(lead[:6], fg=colour, nl=False)  # envkit's colour, never inside the text
        echo(lead[6:] + rest[0])
        for more in rest[1:]:
            echo(" " * indent + more)
        if check.message and not holds:
            echo(wrap(check.message, "        ", "        "))
        if check.fix:
            echo(wrap(f"fix: {check.fix}", "        ", "             "))
    failed = len(rep.failures)
    if failed:
        echo(f"{failed} of {len(rep.checks)} checks failed.", fg="red", bold=True)
    else:
        said = f"{every(len(rep.checks), 'check')} {agree(len(rep.checks), 'holds', 'hold')}."
        echo(said, fg="green", bold=True)


def where(path: Path, locks: Path | None = None) -> None:
    """The profile's file (and its locks folder): build and verify say where they are."""
    echo(table([("profile file", str(path)), *((("locks", str(locks)),) if locks else ())]))


def build(result: BuildResult, as_json: bool) -> None:
    if as_json:
        emit_json(result.to_dict())
        return
    if result.where is not None:
        where(result.where.path, result.where.locks)
    if result.report is not None:
        report_lines(result.report)
    timing = ", ".join(f"{k} {v:.1f} s" for k, v in result.seconds.items())
    source = (
        f"from the published lock of cell {result.cell}, {result.lock}"
        if result.lock
        else f"resolved afresh ({result.fresh})"
    )
    if result.ok:
        verb = "replaced the previous environment" if result.replaced else "created it"
        echo(
            wrap(
                f"Built {result.profile} into {result.venv} {source}: {verb} ({timing}).", "", "  "
            ),
            fg="green",
        )
    else:
        echo(
            wrap(
                f"Build of {result.profile} ({source}) failed verification; {result.venv} was "
                "left as it was.",
                "",
                "  ",
            ),
            fg="red",
            err=True,
        )
