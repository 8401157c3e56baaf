"""What `lock`, `matrix` and `publish` print."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from envkit.render.term import echo, emit_json, encode_json, one_line, table, wrap
from envkit.wording import agree, counted, every

if TYPE_CHECKING:  # the results' types; importing every core module would slow each command
    from envkit.lock.cells import CellState
    from envkit.lock.place import Place
    from envkit.results import Result


# a cell's colour is its result's severity: locked green, source-only yellow, the rest red
_COLOUR = {"ok": "green", "warning": "yellow"}


def _colour(result: Result) -> str:
    return _COLOUR.get(result.severity.value, "red")


def places(found: Sequence[Place]) -> None:
    """Where each profile and its locks are: the first lines of lock, matrix and publish."""
    echo(
        table(
            [("PROFILE", "FILE", "LOCKS"), *((p.profile, str(p.path), str(p.locks)) for p in found)]
        )
    )


def lock_results(results: Sequence[CellState], where: Sequence[Place], as_json: bool) -> None:
    if as_json:
        emit_json(
            {
                "ok": all(
                    r.state not in ("unresolvable", "unreachable", "incompatible") for r in results
                ),
                "profiles": [p.to_dict() for p in where],
                "cells": [r.to_dict() for r in results],
            }
        )
        return
    places(where)
    for r in results:
        said = r.result
        echo(f"{r.cell.profile} / {said.fact('cell')}: ", nl=False)
        echo(said.fact("state"), fg=_colour(said), nl=False)
        echo(
            one_line(
                f" ({r.seconds:.1f} s)"
                + (f", wrote {', '.join(f.name for f in r.files)}" if r.files else "")
            )
        )
        if r.reason:  # a locked cell's result says what locked means; its reason is its own
            echo(wrap(said.message, "    ", "    "))


def _state_rows(found: Sequence[CellState]) -> None:
    rows = [("PROFILE", "CELL", "STATE", "NOTE")]
    rows += [
        (
            s.cell.profile,
            r.fact("cell"),
            r.fact("state"),
            r.message.split(":")[0] if s.reason else "",
        )
        for s, r in ((s, s.result) for s in found)
    ]
    echo(table(rows))


def lock_check(found: Sequence[CellState], where: Sequence[Place], as_json: bool) -> None:
    bad = [r for r in (s.result for s in found) if r.failed]
    if as_json:
        emit_json(
            {
                "ok": not bad,
                "profiles": [p.to_dict() for p in where],
                "cells": [s.to_dict() for s in found],
                "stale": [r.subject for r in bad],
            }
        )
        return
    places(where)
    _state_rows(found)
    if bad:
        verb = agree(len(bad), "is", "are")
        echo(
            f"{len(bad)} of {counted(len(found), 'cell')} {verb} stale, missing, unresolvable "
            "or refused:",
            fg="red",
            bold=True,
        )
        for r in bad:
            echo(wrap(f"{r.subject}: {r.message}", "  ", "    "))
    else:
        said = f"{every(len(found), 'cell')} {agree(len(found), 'is', 'are')}"
        echo(f"{said} current.", fg="green", bold=True)


def matrix(found: Sequence[CellState], where: Sequence[Place], as_json: bool) -> None:
    if as_json:
        emit_json(
            {"ok": True, "profiles": [p.to_dict() for p in where],
             "cells": [s.to_dict() for s in found]}
        )  # fmt: skip
        return
    places(where)
    _state_rows(found)


def github_matrix(matrix: dict[str, Any]) -> None:
    """The object GitHub Actions takes as strategy.matrix, on one line (for $GITHUB_OUTPUT)."""
    encode_json(matrix, separators=(",", ":"))


def published(result: dict[str, Any], where: Sequence[Place], as_json: bool) -> None:
    if as_json:
        emit_json({**result, "profiles": [p.to_dict() for p in where]})
        return
    places(where)
    echo(
        one_line(
            f"Published {counted(len(result['files']), 'file')} and index.json to {result['to']}."
        ),
        fg="green",
    )
