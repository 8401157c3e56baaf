"""``envkit upgrade``'s side-by-side: per profile, one row per fact (what changes, the fact,
the old value, the new), each followed by its evidence and fix, in columns that fit the
terminal (80 columns and narrower down to 60): a long value folds onto more lines within
its column, never cut. ``--json``: every move with its rows (``outputs.schema.json``)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

from envkit.render.term import echo, emit_json, one_line, shown, term_width, wrap
from envkit.wording import counted

if TYPE_CHECKING:  # the core is loaded by the command that uses it
    from envkit.upgrades.sidebyside import Row
    from envkit.upgrades.upgrade import Upgrade

_COLOUR = {"lost": "red", "gained": "green", "changed": "yellow", "unchecked": "yellow"}
CHANGE = 9  # the change column: "unchecked"
GAP = 2


def upgrades(done: Sequence[Upgrade], writing: bool, as_json: bool) -> None:
    if as_json:
        emit_json(
            {
                "ok": not any(u.lost for u in done),
                "write": writing,
                "upgrades": [u.to_dict() for u in done],
            }
        )
        return
    for i, each in enumerate(done):
        if i:
            echo()
        _one(each, writing)


def _widths(width: int) -> tuple[int, int, int, int]:
    room = width - CHANGE - 3 * GAP
    fact = room * 2 // 5
    old = (room - fact) // 2
    return CHANGE, fact, old, room - fact - old


def _cells(texts: Sequence[str], widths: Sequence[int]) -> list[str]:
    """One row of columns: each text folded in its column (long words broken, not cut)."""
    columns = [
        textwrap.wrap(shown(t), w, break_on_hyphens=False, break_long_words=True) or [""]
        for t, w in zip(texts, widths, strict=True)
    ]
    out = []
    for n in range(max(len(c) for c in columns)):
        parts = [
            (c[n] if n < len(c) else "").ljust(w) for c, w in zip(columns, widths, strict=True)
        ]
        out.append((" " * GAP).join(parts).rstrip())
    return out


def _one(done: Upgrade, writing: bool) -> None:
    move = done.move
    old, new = move.old, move.new
    pair = f"vLLM {old.vllm.version} + transformers {old.transformers.version}"
    to = f"vLLM {new.vllm.version} + transformers {new.transformers.version}"
    head = f"{move.profile.name}: {pair} -> {to}" if move.moves else f"{move.profile.name}: {pair}"
    echo(wrap(head, "", "  "), bold=True)
    echo(wrap(f"chosen: {move.asked}", "  ", "    "))
    gpus = ", ".join(str(g) for g in move.wanted.gpus) or "none known"
    echo(wrap(f"GPUs kept: {gpus} ({move.wanted.gpus_from})", "  ", "    "))
    if move.wanted.driver_from:
        echo(wrap(f"driver: {move.wanted.driver_from}, CUDA {move.wanted.driver_cuda} at most",
                  "  ", "    "))  # fmt: skip
    width = min(term_width(), 100)
    widths = _widths(width)
    if move.moves:  # a profile that stays has nothing to put side by side
        echo()
        for line in _cells(("change", "fact", f"vLLM {old.vllm.version}",
                            f"vLLM {new.vllm.version}"), widths):  # fmt: skip
            echo(line, bold=True)
    kind = ""
    for row in done.rows if move.moves else ():
        if row.kind.value != kind:
            kind = row.kind.value
            echo(kind, bold=True)
        _row(row, widths)
    if move.rejected:
        echo()
        echo("Newer, not taken:")
        for line in move.rejected:
            echo(wrap(line, "  ", "    "))
    for note in move.notes:
        echo(wrap(f"note: {note}", "", "  "))
    echo()
    _verdict(done, writing)


def _fits(text: str, width: int) -> bool:
    return all(len(word) <= width for word in shown(text).split())


def _row(row: Row, widths: Sequence[int]) -> None:
    change = row.change.value
    old, new = _listed(row.old), _listed(row.new)
    indent = " " * (CHANGE + GAP)
    apart = not (_fits(old, widths[2]) and _fits(new, widths[3]))
    # a value with a word wider than its column goes on lines of its own, whole
    cells = (change, row.subject, "see below", "see below") if apart else (
        change, row.subject, old, new)  # fmt: skip
    lines = _cells(cells, widths)
    echo(lines[0], fg=_COLOUR.get(change))
    for line in lines[1:]:
        echo(line)
    if apart:
        for said, value in (("was", old), ("now", new)):
            echo(wrap(f"{said}: {value or '-'}", indent, indent + "  "))
    echo(wrap(f"evidence: {row.evidence}", indent, indent + "  "), dim=True)
    if row.fix:
        echo(wrap(f"fix: {row.fix}", indent, indent + "  "))


LISTED = 12  # names of one value shown in the text; --json lists every one


def _listed(value: str) -> str:
    """A long list of names shortened, saying so: the JSON output holds them all."""
    names = value.split(", ")
    if len(names) <= LISTED:
        return value
    return (
        ", ".join(names[: LISTED - 4]) + f" and {len(names) - LISTED + 4} more (--json lists all)"
    )


def _some(names: list[str], shown: int = 4) -> str:
    more = f" and {len(names) - shown} more, listed above" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _verdict(done: Upgrade, writing: bool) -> None:
    move = done.move
    lost = done.lost
    if lost:
        kinds: dict[str, list[str]] = {}
        for row in lost:
            kinds.setdefault(row.kind.value, []).append(row.subject)
        said = "; ".join(f"{k} {len(v)} ({_some(v)})" for k, v in kinds.items())
        echo(wrap(f"lost: {said}", "", "  "), fg="red")
    elif move.moves:
        echo(one_line("ok: the move keeps everything the profile had"), fg="green")
    elif move.to:
        echo(one_line(f"ok: {move.profile.name} already pins vLLM {move.old.vllm.version}"))
    elif move.untried:
        said = (
            f"none of the {move.searched} newest keeps it all"
            if move.searched > 1
            else "the newest does not keep it all"
        )
        echo(wrap(f"ok: {move.profile.name} stays where it is: {said}, and {move.untried} "
                  "older not tried", "", "  "))  # fmt: skip
    else:
        echo(one_line(f"ok: {move.profile.name} stays where it is (nothing newer keeps it all)"))
    if not writing:
        if move.moves:
            echo(wrap(f"Nothing written; envkit upgrade {move.profile.name}"
                      f"{f' --to vllm=={move.to}' if move.to else ''} --write "
                      "rewrites the profile, relocks and publishes it.", "", "  "))  # fmt: skip
        return
    if done.written is None:
        echo("Nothing written: the profile already pins this release.")
        return
    echo(wrap(f"wrote {done.written.path}", "", "  "), fg="green")
    for state in done.locked:
        echo(one_line(f"  {state.cell.name}: {state.state}"), fg=None if state.status.usable
             else "red")  # fmt: skip
        if state.reason:
            echo(wrap(state.reason, "    ", "    "))
    if done.published is not None:
        files = len(done.published.get("files", []))
        said = counted(files, "file")
        echo(one_line(f"published: {said} and index.json to {done.published['to']}"))
        echo(one_line(f"next: envkit build {move.profile.name} builds the new environment"))
    else:
        name = move.profile.name
        echo(
            wrap(
                f"not published: a cell did not lock (see above); envkit lock {name}, then "
                f"envkit publish {name}, finish the move once it locks.",
                "",
                "  ",
            ),
            fg="red",
        )
