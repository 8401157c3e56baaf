"""Replacing a virtual environment so that the old one is never lost.

A build happens aside, in ``<parent>/.envkit/<name>/new`` (a relocatable venv), and only a
verified build is swapped in with two renames. A journal written before every step lets the
next envkit command on that venv finish or undo whatever a killed process left:

=========== ===============================================================================
phase       what recovery does
=========== ===============================================================================
building    remove ``new``; the venv was never touched
swapping    if the venv is already the new build, finish; else put ``old`` back, remove ``new``
cleanup     remove ``old`` (the swap is complete)
=========== ===============================================================================

One file lock per venv serialises builds and verifications of the same venv.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from .atomicfile import write_atomic
from .errors import BadInput, EnvironmentBroken

MARKER = "envkit-build.json"


def _write_json(path: Path, data: dict[str, object]) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def _read_json(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def is_venv(path: Path) -> bool:
    return (path / "pyvenv.cfg").is_file()


class VenvSlot:
    """The venv at one path, with its lock, journal and scratch folders."""

    def __init__(self, venv: Path) -> None:
        self.venv = Path(os.path.abspath(venv))
        self.state = self.venv.parent / ".envkit" / self.venv.name
        self.journal = self.state / "journal.json"
        self.staging = self.state / "new"
        self.backup = self.state / "old"

    @contextmanager
    def locked(self, on_wait: Callable[[str], None] | None = None) -> Iterator[list[str]]:
        """Hold this venv's lock; first repair what a killed envkit left. Yields what was done."""
        try:
            self.state.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BadInput(
                f"Cannot create envkit's folder {str(self.state)!r} ({exc.strerror}).",
                "Choose a --venv in a folder you can write to.",
            ) from None
        lock = FileLock(str(self.state / "lock"))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            if on_wait is not None:
                on_wait(f"waiting for another envkit process working on {self.venv} ...")
            lock.acquire()
        try:
            yield self.recover()
        finally:
            lock.release()

    def recover(self) -> list[str]:
        """Finish or undo a build that was killed. Call with the lock held."""
        done: list[str] = []
        journal = _read_json(self.journal)
        phase = str(journal.get("phase", "")) if journal else ""
        build_id = str(journal.get("build_id", "")) if journal else ""
        if phase == "swapping" and self._venv_build_id() == build_id:
            phase = "cleanup"
        if phase == "swapping" and not self.venv.exists() and self.backup.exists():
            os.rename(self.backup, self.venv)
            done.append(f"restored the previous environment at {self.venv}")
        if phase == "cleanup" and self.backup.exists():
            _remove(self.backup)
            done.append("removed the environment replaced by the last completed build")
        if self.staging.exists():
            _remove(self.staging)
            done.append(f"removed an unfinished build left by an interrupted envkit ({phase})")
        if self.backup.exists():
            # No journal explains it: never delete an environment we cannot account for.
            raise EnvironmentBroken(
                f"Found an environment at {str(self.backup)!r} that no envkit journal accounts "
                f"for, next to {str(self.venv)!r}.",
                f"Inspect both; keep the one you want at {self.venv} and delete the other, "
                "then run envkit again.",
            )
        if journal is not None:
            self.journal.unlink()
        return done

    def _venv_build_id(self) -> str:
        marker = _read_json(self.venv / MARKER)
        return str(marker.get("build_id", "")) if marker else ""

    def begin(self, build_id: str) -> Path:
        """Start a build: refuse to replace a non-venv, journal it, return the staging path."""
        if self.venv.exists() and not is_venv(self.venv):
            if self.venv.is_dir() and not any(self.venv.iterdir()):
                pass  # an empty folder holds nothing to lose
            else:
                raise BadInput(
                    f"{str(self.venv)!r} exists and is not a virtual environment "
                    "(no pyvenv.cfg); envkit will not replace it.",
                    "Move it away or choose another --venv.",
                )
        _write_json(self.journal, {"phase": "building", "build_id": build_id, "pid": os.getpid()})
        return self.staging

    def commit(self, build_id: str, marker: dict[str, object]) -> bool:
        """Swap the verified staging venv in. Returns whether an environment was replaced."""
        _write_json(self.staging / MARKER, {**marker, "build_id": build_id})
        _write_json(self.journal, {"phase": "swapping", "build_id": build_id, "pid": os.getpid()})
        replaced = self.venv.exists() or self.venv.is_symlink()
        if replaced:
            os.rename(self.venv, self.backup)
        os.rename(self.staging, self.venv)
        _write_json(self.journal, {"phase": "cleanup", "build_id": build_id, "pid": os.getpid()})
        if replaced:
            _remove(self.backup)
        self.journal.unlink()
        return replaced

    def abort(self) -> list[str]:
        """Drop a build that failed or was interrupted, at any step: the journal says which."""
        return self.recover()


def new_build_id() -> str:
    return f"{os.getpid()}-{time.time_ns()}"
