"""``envkit upgrade``'s assembly: the move chosen for one profile, its side-by-side (with the
profile's ``[serve]`` table checked by ``envkit lint`` against both releases) and, with
``--write``, the profile rewritten, its cells relocked and published. Without ``--write``
nothing is written anywhere."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from packaging.version import Version

from envkit.compat.check.checker import Checker
from envkit.errors import NetworkError
from envkit.gpu.arch import Capability
from envkit.gpu.driver import DriverVersion, newest_cuda
from envkit.gpu.published.kerneltable import KernelTable
from envkit.lock.cells import CellState
from envkit.lock.locker import Locker
from envkit.profiles.profile import Profile
from envkit.serving.lint.check import lint_args
from envkit.upgrades import rewrite
from envkit.upgrades.sidebyside import Lints, Row, lost, rows
from envkit.upgrades.target import Chooser, Move, Wanted, choose, gpus_of, pins


@dataclass(frozen=True)
class Asked:
    """What the command line asked (parsed where it entered, ``cli.options``)."""

    gpus: tuple[Capability, ...] = ()
    gpus_from: str = ""  # "--gpu h100-80gb"
    driver: DriverVersion | None = None
    to: Version | None = None


@dataclass(frozen=True)
class Upgrade:
    move: Move
    rows: tuple[Row, ...]
    written: Profile | None = None  # the profile as --write left it
    locked: tuple[CellState, ...] = ()
    published: Mapping[str, Any] | None = None

    @property
    def lost(self) -> tuple[Row, ...]:
        return lost(self.rows)

    def to_dict(self) -> dict[str, Any]:
        move = self.move

        def side(s: Any) -> dict[str, Any]:
            return {
                "vllm": s.vllm.version,
                "transformers": s.transformers.version,
                "torch": s.torch or None,
                "cuda": s.cuda or None,
            }

        return {
            "profile": move.profile.name,
            "path": str(move.profile.path),
            "from": side(move.old),
            "to": side(move.new),
            "moves": move.moves,
            "chosen_by": move.asked,
            "gpus": [str(g) for g in move.wanted.gpus],
            "gpus_from": move.wanted.gpus_from,
            "driver_cuda": move.wanted.driver_cuda or None,
            "ok": not self.lost,
            "lost": len(self.lost),
            "rows": [r.to_dict() for r in self.rows],
            "rejected": list(move.rejected),
            "notes": list(move.notes),
            "written": self.written is not None,
            "locked": [s.to_dict() for s in self.locked],
            "published": dict(self.published) if self.published is not None else None,
        }


def wanted(profile: Profile, asked: Asked, table: KernelTable, old_vllm: str) -> Wanted:
    platforms = profile.matrix.platforms
    probe = Wanted((), "", platforms=platforms)
    gpus, where = asked.gpus, asked.gpus_from
    if not gpus:
        gpus = gpus_of(table, old_vllm, probe.platform)
        where = f"what vLLM {old_vllm}'s builds run on, per envkit's kernel table"
    cuda, said = "", ""
    if asked.driver is not None:
        newest = newest_cuda(asked.driver)
        cuda = f"{newest[0]}.{newest[1]}" if newest else "0.0"
        said = f"--driver {asked.driver}"
    return Wanted(tuple(gpus), where, cuda, said, platforms)


def plan(profile: Profile, checker: Checker, table: KernelTable, asked: Asked) -> Upgrade:
    """The move for ``profile`` and its rows; nothing written."""
    vllm, transformers, torch = pins(profile)
    chooser = Chooser(checker, table, profile)
    old = chooser.side(vllm, transformers, torch)
    move = choose(chooser, old, wanted(profile, asked, table, str(vllm)), asked.to, profile)
    return Upgrade(move, rows(move, table, lints(profile, move, checker)))


def search(checker: Checker, profile: Profile) -> Upgrade:
    """What ``envkit upgrade PROFILE`` asks with no option, for ``knowledge export --upgrade``
    to record: the default target search against the shipped kernel table."""
    from envkit.gpu.published import kerneltable

    return plan(profile, checker, kerneltable.shipped(), Asked())


def lints(profile: Profile, move: Move, checker: Checker) -> Lints:
    serve = profile.serve
    if not serve.args and not serve.env:
        return Lints()
    after = rewrite.moved_profile(profile, move)
    try:
        old = lint_args(profile, serve.args, serve.env, session=checker)
        new = lint_args(after, serve.args, serve.env, session=checker)
    except NetworkError as exc:
        return Lints(note=f"not checked against vLLM's parser ({exc.message})", checked=True)
    return Lints(old, new, checked=True)


def write(
    done: Upgrade,
    checker: Checker,
    locker: Locker,
    refusals: Callable[[list[Profile]], dict[str, str]],
    root: str | None,
) -> Upgrade:
    """``--write``: the profile rewritten, its cells locked and, when every cell locked,
    published. A move that does not move writes nothing."""
    from envkit.lock import states

    if not done.move.moves:
        return done
    for backend in rewrite.backends_after(done.move.profile, done.move):
        unreachable = locker.reach(backend)
        if unreachable is not None:  # before the profile is touched: never half a move
            raise unreachable
    after = rewrite.write(done.move.profile, done.move, checker)
    results = tuple(locker.lock([after], refused=refusals([after])))
    published = None
    if results and all(r.status.usable for r in results):
        published = states.publish([after], root, None)
    return dataclasses.replace(done, written=after, locked=results, published=published)
