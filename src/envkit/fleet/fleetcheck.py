"""``envkit fleet check``: the answers (from files or Ray), the cell of each node, the verdicts.

Fingerprint files are read by :func:`envkit.fleet.fingerprint.read`, each node named by its
host (and the file, when two files name one host). Without ``--cell``, each node is judged
against the cell of its own Python and platform; a node no cell fits is judged against the
cell most nodes have, so its Python is what the table flags.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envkit.errors import BadInput
from envkit.fleet import fingerprint, lockcell
from envkit.fleet.judge import Answer, Context, NodeVerdict, exit_code, judge
from envkit.lock.place import Place, place
from envkit.profiles.profile import Profile

MAX_FILES = 4_096  # fingerprint files in one check


@dataclass(frozen=True)
class FleetResult:
    place: Place
    source: str  # 'ray 127.0.0.1:6379', '3 files'
    venv: Path | None
    verdicts: tuple[NodeVerdict, ...]

    @property
    def exit_code(self) -> int:
        return exit_code(self.verdicts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.exit_code == 0,
            "profile": self.place.to_dict(),
            "source": self.source,
            "venv": str(self.venv) if self.venv else None,
            "nodes": [v.to_dict() for v in self.verdicts],
            "differ": [v.node for v in self.verdicts if v.differs],
            "not_answering": [v.node for v in self.verdicts if not v.answered],
        }


def from_files(paths: Sequence[Path]) -> list[Answer]:
    """One answer per file, named by its host (with the file's name when hosts repeat)."""
    if len(paths) > MAX_FILES:
        raise BadInput(f"{len(paths)} fingerprint files; envkit reads at most {MAX_FILES}.")
    prints = [fingerprint.read(p) for p in paths]
    hosts = Counter(f.host for f in prints)
    return [
        Answer(f.host if hosts[f.host] == 1 else f"{f.host} ({p.name})", f)
        for p, f in zip(paths, prints, strict=True)
    ]


def check(
    profile: Profile,
    answers: Sequence[Answer],
    *,
    source: str,
    venv: Path | None,
    cell: str | None,
    root: str | None,
) -> FleetResult:
    found = lockcell.cell_states(profile, root)
    chosen: dict[str, str] = {}
    refused: BadInput | None = None
    for answer in answers:
        if answer.fingerprint is None:
            continue
        try:
            chosen[answer.node] = lockcell.choose(
                profile, answer.fingerprint, cell, found
            ).cell.name
        except BadInput as exc:
            if cell is not None:
                raise
            refused = refused or exc
    if refused is not None and not chosen:
        raise refused
    default = Counter(chosen.values()).most_common(1)[0][0] if chosen else ""
    states = {s.cell.name: s for s in found}
    loaded = {
        name: lockcell.load(profile, states[name], root)
        for name in {*chosen.values(), default}
        if name
    }
    cells = {
        a.node: loaded[chosen.get(a.node, default)] for a in answers if chosen.get(a.node, default)
    }
    context = Context(profile.name, venv, cells)
    return FleetResult(place(profile, root), source, venv, tuple(judge(answers, context)))
