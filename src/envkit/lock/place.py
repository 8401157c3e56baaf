"""Where a profile's file and its locks are: the constraints folder (``--constraints``,
``$ENVKIT_CONSTRAINTS``, else ``constraints/`` beside ``envs/``), a profile's cell folder in
it, and :class:`Place`, which every command about a profile says (read without the lock
cells themselves: verify names the place and reads no lock)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from envkit.profiles.profile import Profile


def constraints_root(profile: Profile, option: str | None = None) -> Path:
    """``--constraints DIR``, ``$ENVKIT_CONSTRAINTS``, else ``constraints/`` beside ``envs/``."""
    chosen = option or os.environ.get("ENVKIT_CONSTRAINTS")
    return Path(chosen) if chosen else profile.path.resolve().parent.parent / "constraints"


def cell_folder(profile: Profile, option: str | None = None) -> Path:
    return constraints_root(profile, option) / profile.name


@dataclass(frozen=True)
class Place:
    """Where a profile's file and its locks are (absolute), said by every command about it."""

    profile: str
    path: Path
    locks: Path

    def to_dict(self) -> dict[str, str]:
        return {"name": self.profile, "path": str(self.path), "locks": str(self.locks)}


def place(profile: Profile, option: str | None = None) -> Place:
    return Place(profile.name, profile.path.absolute(), cell_folder(profile, option).absolute())
