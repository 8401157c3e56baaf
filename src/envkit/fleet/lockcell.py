"""The lock cell a node is judged against, and the packages it locks.

The cell is ``--cell`` when given, else the profile's cell of the node's Python (X.Y) and
platform (``lock.cells``; several backends need ``--cell``). It must be published and
current (``lock.states``: locked or source-only); a stale or missing cell is bad input
naming the command that locks it, never a verdict on the nodes. Its packages are read from
the cell's PEP 751 pylock (``lock.pylocks``), each with its version and the markers that say
where it is installed, evaluated for the node (its Python and machine).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from packaging.markers import InvalidMarker, Marker, default_environment
from packaging.utils import canonicalize_name

from envkit.errors import BadInput
from envkit.fleet.fingerprint import Fingerprint
from envkit.io.escaping import shell_command
from envkit.lock import pylocks
from envkit.lock.cells import Cell, CellState, read_lock
from envkit.lock.place import cell_folder
from envkit.lock.states import states
from envkit.profiles.profile import Profile


@dataclass(frozen=True)
class Locked:
    name: str  # canonical
    version: str
    marker: str = ""  # '' for every machine


@dataclass(frozen=True)
class LockCell:
    """One published cell: its axes and its packages."""

    cell: Cell
    packages: tuple[Locked, ...]

    @property
    def name(self) -> str:
        return self.cell.name

    def wanted_on(self, node: Fingerprint) -> dict[str, str]:
        """The packages the lock installs on ``node`` (its markers evaluated there)."""
        env: dict[str, str] = {k: str(v) for k, v in default_environment().items()}
        short = ".".join(node.python.split(".")[:2])
        env.update(
            python_version=short,
            python_full_version=node.python,
            sys_platform=node.platform.split("-")[0],
            platform_system=node.platform.split("-")[0].capitalize(),
            platform_machine=node.machine or node.platform.split("-", 1)[-1],
        )
        return {
            p.name: p.version
            for p in self.packages
            if not p.marker or Marker(p.marker).evaluate(env)
        }


def cell_states(profile: Profile, root: str | None) -> list[CellState]:
    """Every declared cell of ``profile`` with its status (``lock.states``)."""
    return states(profile, root)


def choose(
    profile: Profile, node: Fingerprint, cell: str | None, found: list[CellState]
) -> CellState:
    """The cell ``node`` is judged against (see the module's text); BadInput otherwise."""
    every = {s.cell.name: s for s in found}
    if cell is not None:
        chosen = every.get(cell)
        if chosen is None:
            raise BadInput(
                f"Profile {profile.name} has no cell {cell}.",
                f"Its cells: {', '.join(sorted(every)) or 'none'} (envkit matrix {profile.name}).",
            )
        return chosen
    short = ".".join(node.python.split(".")[:2])
    fitting = [
        s for s in every.values() if s.cell.python == short and s.cell.platform == node.platform
    ]
    if len(fitting) != 1:
        what = "no cell" if not fitting else f"{len(fitting)} cells"
        raise BadInput(
            f"Profile {profile.name} has {what} for node {node.host} (Python {short}, "
            f"{node.platform}).",
            f"Name the cell with --cell; its cells: {', '.join(sorted(every)) or 'none'}.",
        )
    return fitting[0]


def load(profile: Profile, state: CellState, root: str | None) -> LockCell:
    """The published cell's packages; BadInput naming the command when it is not usable."""
    cell = state.cell
    if not state.status.usable:
        lock = shell_command(["envkit", "lock", profile.name, "--cell", cell.name])
        raise BadInput(
            f"Cell {cell.name} of profile {profile.name} is {state.state}, so there is no "
            f"lock to judge the nodes against ({state.reason or 'no published files'}).",
            f"Lock it first: {lock}.",
        )
    path = cell_folder(profile, root) / cell.pylock_name
    text = read_lock(path)
    pylocks.validate(text, str(path))  # WheelError naming the key when it is not PEP 751
    return LockCell(cell, tuple(_packages(pylocks.load(text))))


def _packages(data: dict[str, Any]) -> list[Locked]:
    found = []
    for package in data.get("packages", []):
        if not isinstance(package, dict):
            continue
        name, version = package.get("name"), package.get("version")
        marker = package.get("marker", "")
        if not isinstance(name, str) or not isinstance(version, str):
            continue  # a pylock package without a version (a direct URL) is not pinned
        text = marker if isinstance(marker, str) else ""
        try:
            Marker(text) if text else None
        except InvalidMarker:
            text = ""
        found.append(Locked(canonicalize_name(name), version, text))
    return found
