"""The vocabulary of locks, shared by the locker, the lock state and the build.

A **cell** is one Python x platform x torch backend of a profile (``py3.12-linux-x86_64-cu124``);
its **status** says what is published for it; a :class:`CellState` is one cell's status with
its files and reason; the **manifest** (``constraints/<profile>/lock.json``) records the status
of every cell locked from one profile **digest** (the profile file's content hash).

Nothing here runs uv or writes a lock: lock/locker.py locks, lock/states.py reads the files on
disk and publishes, env/build.py installs a published lock.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from envkit.errors import (
    EXIT_BAD_INPUT,
    EXIT_CHECK_FAILED,
    EXIT_OK,
    FileSystemError,
    UnreadableFile,
)
from envkit.gpu.needs import for_backend
from envkit.io.atomicfile import held, write_atomic
from envkit.io.files import MiB, present, read_small, read_small_text
from envkit.profiles.profile import MAX_PROFILE_BYTES, Profile, content_digest
from envkit.results import Facts, Result, Severity

MAX_LOCK_BYTES = 32 * MiB  # a cell's constraints or pylock: real ones are a few hundred KB
MAX_MANIFEST_BYTES = 4 * MiB  # lock.json

MAX_MANIFEST_BYTES = 16 * 2**20  # lock.json of a matrix far larger than any real one


class CellStatus(str, Enum):
    """What a lock cell's published files are worth.

    >>> CellStatus("source-only").usable, CellStatus.STALE.failing
    (True, True)
    >>> lock_exit_code([CellStatus.LOCKED, CellStatus.UNREACHABLE])
    2
    """

    LOCKED = "locked"  # resolved, wheels for every package
    SOURCE_ONLY = "source-only"  # resolved, but some package only as a source distribution
    UNRESOLVABLE = "unresolvable"  # uv found no solution (its reason is kept)
    STALE = "stale"  # files from another profile digest, or resolving again differs
    MISSING = "missing"  # never locked
    UNREACHABLE = "unreachable"  # an index could not be reached: never recorded or published
    # refused, written nowhere: the pins fail `envkit compat`, or the torch the cell resolved
    # to is not the build its backend names (a CPU-only wheel in a cu128 cell)
    INCOMPATIBLE = "incompatible"

    @property
    def usable(self) -> bool:
        """A published lock that can be installed."""
        return self in (CellStatus.LOCKED, CellStatus.SOURCE_ONLY)

    @property
    def failing(self) -> bool:
        """What `lock --check` reports: the published files cannot be trusted as current, or
        a declared cell has none."""
        return self in (
            CellStatus.STALE,
            CellStatus.MISSING,
            CellStatus.UNRESOLVABLE,
            CellStatus.INCOMPATIBLE,
        )


class TorchOrigin(str, Enum):
    """Where a lock took torch from, so a build from it asks the same place."""

    BACKEND = "backend"  # uv --torch-backend (the PyTorch index)
    DEFAULT = "default"  # the default index
    MIRROR = "mirror"  # a PyTorch index mirror (its URL is not recorded: it may hold secrets)


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One Python x platform x backend of a profile's lock matrix.

    >>> cell = Cell(profile="p", python="3.12", platform="linux-x86_64", backend="cu124")
    >>> cell.name, cell.pylock_name
    ('py3.12-linux-x86_64-cu124', 'pylock.py312-linux-x86_64-cu124.toml')
    """

    profile: str
    python: str
    platform: str
    backend: str

    @property
    def name(self) -> str:
        return cell_name(self.python, self.platform, self.backend)

    @property
    def pylock_name(self) -> str:
        """PEP 751 forbids dots in the name part of ``pylock.<name>.toml``."""
        return f"pylock.{self.name.replace('.', '')}.toml"

    @property
    def txt_name(self) -> str:
        return f"{self.name}.txt"

    def to_dict(self) -> dict[str, str]:
        return {
            "profile": self.profile,
            "cell": self.name,
            "python": self.python,
            "platform": self.platform,
            "backend": self.backend or "any",
        }


def driver_dict(backend: str) -> dict[str, str | None] | None:
    """What a cell's JSON (lock, matrix, lock.json, index.json) says of the driver it needs:
    ``{"cuda", "linux_driver", "minor_compat_floor"}``, None for cpu and other cells."""
    need = for_backend(backend)
    return need.to_dict() if need is not None else None


def cell_name(python: str, platform_name: str, backend: str) -> str:
    return f"py{python}-{platform_name}-{backend or 'any'}"


def cells(profile: Profile) -> list[Cell]:
    return [
        Cell(profile=profile.name, python=py, platform=plat, backend=backend)
        for py in profile.matrix.python
        for plat in profile.matrix.platforms
        for backend in (profile.matrix.backends or ("",))
    ]


def machine_platform() -> str:
    """This machine as a matrix platform name (linux-x86_64, ...)."""
    machine = platform.machine().lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    system = {"darwin": "macos", "win32": "windows"}.get(sys.platform, sys.platform)
    if system == "macos" and arch == "aarch64":
        return "macos-arm64"
    return f"{system}-{arch}"


def lock_exit_code(statuses: Iterable[CellStatus]) -> int:
    """What `envkit lock` exits with: 2 when an index could not be reached (no verdict, nothing
    recorded), 1 when a cell is unresolvable or refused as incompatible, else 0."""
    seen = set(statuses)
    if CellStatus.UNREACHABLE in seen:
        return EXIT_BAD_INPUT
    failed = {CellStatus.UNRESOLVABLE, CellStatus.INCOMPATIBLE}
    return EXIT_CHECK_FAILED if seen & failed else EXIT_OK


def check_exit_code(statuses: Iterable[CellStatus]) -> int:
    """What `envkit lock --check` exits with: 1 when any cell is failing, else 0."""
    return EXIT_CHECK_FAILED if any(s.failing for s in statuses) else EXIT_OK


@dataclass(frozen=True, kw_only=True)
class CellState:
    """One cell's status, its files (when published or just written) and why."""

    cell: Cell
    status: CellStatus
    reason: str = ""
    files: tuple[Path, ...] = ()
    source_only: tuple[str, ...] = ()
    torch: TorchOrigin = TorchOrigin.BACKEND
    seconds: float = 0.0

    @property
    def state(self) -> str:
        return self.status.value

    @property
    def result(self) -> Result:
        """The cell as one result (``cell-STATE``), what `lock`, `lock --check` and `matrix`
        print and carry in ``--json``: a stale or missing cell fails with the command that
        locks it again; an unreachable index is no verdict (``unknown``)."""
        where = f"{self.cell.profile}/{self.cell.name}"
        relock = f"envkit lock {self.cell.profile} --cell {self.cell.name}"
        return Result(
            code=f"cell-{self.status.value}",
            severity=_CELL_SEVERITY[self.status],
            subject=where,
            message=self.reason or _CELL_SAID[self.status],
            evidence=Facts({"state": self.status.value, "cell": self.cell.name}),
            fix=relock if self.status in (CellStatus.STALE, CellStatus.MISSING) else "",
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.cell.to_dict(),
            "driver": driver_dict(self.cell.backend),
            "state": self.status.value,
            "reason": self.reason,
            "source_only": list(self.source_only),
            "files": [str(f) for f in self.files],
            "seconds": round(self.seconds, 3),
            "result": self.result.to_dict(),
        }


_CELL_SEVERITY = {
    CellStatus.LOCKED: Severity.OK,
    CellStatus.SOURCE_ONLY: Severity.WARNING,  # usable, but a package builds from source
    CellStatus.UNREACHABLE: Severity.UNKNOWN,  # a network failure is never a verdict
    CellStatus.UNRESOLVABLE: Severity.ERROR,
    CellStatus.STALE: Severity.ERROR,
    CellStatus.MISSING: Severity.ERROR,
    CellStatus.INCOMPATIBLE: Severity.ERROR,
}
_CELL_SAID = {
    CellStatus.LOCKED: "locked, with wheels for every package",
    CellStatus.SOURCE_ONLY: "locked, with some package only as a source distribution",
    CellStatus.UNREACHABLE: "an index could not be reached: nothing was recorded",
    CellStatus.UNRESOLVABLE: "uv found no resolution",
    CellStatus.STALE: "the published files are not the profile's current resolution",
    CellStatus.MISSING: "never locked",
    CellStatus.INCOMPATIBLE: "refused: the resolution would not run",
}


def digest(profile: Profile) -> str:
    """The profile's content digest (``Profile.digest``, computed once when its text was
    read: ``profiles.profile.content_digest``): any edit of the file makes its locks stale.
    A profile made by hand, without a text, is read for it."""
    if profile.digest:
        return profile.digest
    return content_digest(read_small_text(profile.path, MAX_PROFILE_BYTES, what="profile"))


FILE_LOCKS = ".envkit-filelocks"  # beside index.json and lock.json; its .gitignore ignores it


@contextmanager
def held_aside(path: Path) -> Iterator[None]:
    """``io.atomicfile.held`` on the shared file ``path`` (``lock.json``, ``index.json``),
    its lock file kept in a folder envkit owns beside it (``.envkit-filelocks/``) whose own
    ``.gitignore`` ignores all of it: in a repository of locks, `git status` lists the
    locks, never envkit's file locks."""
    folder = Path(os.path.realpath(path)).parent / FILE_LOCKS
    try:
        folder.mkdir(exist_ok=True)
    except OSError as exc:
        raise FileSystemError(folder, exc, "create") from None
    if not present(folder / ".gitignore"):
        write_atomic(
            folder / ".gitignore", "# envkit's file locks, free between runs: never committed\n*\n"
        )
    with held(path, folder=folder):
        yield


def file_digest(path: Path) -> str:
    """The profile digest a lock file's header names ('' when none)."""
    try:
        text = read_lock(path)
    except UnreadableFile:
        return ""
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        if line.startswith("# profile-digest: "):
            return line.split(": ", 1)[1].strip()
    return ""


def read_lock(path: Path) -> str:
    """A lock file's text (constraints or pylock), read within MAX_LOCK_BYTES as a regular
    file. Raises UnreadableFile."""
    return read_small_text(path, MAX_LOCK_BYTES, what="lock file")


def read_lock_bytes(path: Path) -> bytes:
    """A lock file's bytes, within the same limits as :func:`read_lock`."""
    return read_small(path, MAX_LOCK_BYTES, what="lock file")


def body(path: Path) -> str:
    """A lock file without its header."""
    lines = read_lock(path).splitlines(keepends=True)
    return "".join(
        lines[next((i for i, ln in enumerate(lines) if not ln.startswith("#")), len(lines)) :]
    )


@dataclass(frozen=True, kw_only=True)
class ManifestEntry:
    """What lock.json records of one cell."""

    state: CellStatus
    reason: str = ""
    source_only: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    torch: TorchOrigin = TorchOrigin.BACKEND
    cell: dict[str, str] = field(default_factory=dict)  # the cell's axes, for readers

    @classmethod
    def from_dict(cls, data: Any) -> ManifestEntry | None:
        """None when ``data`` is not an entry envkit wrote (the cell is judged from files)."""
        if not isinstance(data, dict):
            return None
        try:
            state = CellStatus(data.get("state"))
            torch = TorchOrigin(data.get("torch", "backend"))
        except ValueError:
            return None
        reason, names, sources = (
            data.get("reason", ""),
            data.get("files", []),
            data.get("source_only", []),
        )
        if not isinstance(reason, str) or not _strings(names) or not _strings(sources):
            return None
        axes = {k: v for k in ("profile", "cell", "python", "platform", "backend") if
                isinstance(v := data.get(k), str)}  # fmt: skip
        return cls(
            state=state,
            reason=reason,
            source_only=tuple(sources),
            files=tuple(names),
            torch=torch,
            cell=axes,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.cell,
            "driver": driver_dict(self.cell.get("backend", "")),
            "state": self.state.value,
            "reason": self.reason,
            "source_only": list(self.source_only),
            "files": list(self.files),
            "torch": self.torch.value,
        }


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


@dataclass(frozen=True, kw_only=True)
class Manifest:
    """``lock.json``: every cell's recorded status, for one profile digest."""

    profile: str
    digest: str
    uv: str = ""
    cells: dict[str, ManifestEntry] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> Manifest | None:
        """The manifest at ``path``; None when missing or not one envkit wrote."""
        try:
            text = read_small_text(path, MAX_MANIFEST_BYTES, what="lock manifest")
            data = json.loads(text)
        except (UnreadableFile, ValueError, RecursionError):
            return None
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Any) -> Manifest | None:
        if not isinstance(data, dict) or not isinstance(data.get("cells", {}), dict):
            return None
        profile, digest_, uv = data.get("profile"), data.get("digest"), data.get("uv", "")
        if not isinstance(profile, str) or not isinstance(digest_, str) or not isinstance(uv, str):
            return None
        entries = {
            str(name): entry
            for name, raw in data.get("cells", {}).items()
            if (entry := ManifestEntry.from_dict(raw)) is not None
        }
        return cls(profile=profile, digest=digest_, uv=uv, cells=entries)

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "digest": self.digest,
            "uv": self.uv,
            "cells": {name: self.cells[name].to_dict() for name in sorted(self.cells)},
        }

    def write(self, path: Path) -> None:
        write_atomic(path, json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")
