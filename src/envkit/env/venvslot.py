"""Replacing a virtual environment so that the old one is never lost, and nothing else is.

**Ownership.** envkit replaces or deletes only what it can prove is a disposable environment:
one it made (its marker, ``envkit-build.json``, is written into every venv at creation and
kept through swaps) or a folder whose top level holds nothing but what a virtual environment
holds (:data:`VENV_ENTRIES`). Anything else is refused, naming the entries it did not expect,
before anything is created or touched. The venv envkit itself runs from is never replaced.

**Symlinked venvs stay links.** A venv path that is a symlink (``.venv`` pointing at a bigger
disk) is never moved, replaced or deleted: the slot is the folder the link leads to (its
real path, :attr:`VenvSlot.path`), judged by the rules above, and everything below happens
there, beside it and on its file system (``<target's parent>/.envkit/<target's name>/``).
A link to nothing in an existing folder is built into; a link into a missing folder (an
unmounted disk), a loop, or a link to a file is refused.

**Swaps.** A build happens aside, in ``<parent>/.envkit/<name>/new`` (``parent`` and ``name``
of the slot's real path), and only a verified build is swapped in. A journal written before
every step lets the next envkit command on that venv finish or undo whatever a killed process
left:

=========== ===============================================================================
phase       what recovery does
=========== ===============================================================================
building    remove ``new``; the venv was never touched
swapping    if the venv is already the new build, finish; else put ``old`` back, remove ``new``
cleanup     remove ``old`` (the swap is complete)
=========== ===============================================================================

From the journal's ``swapping`` to its ``cleanup``, Ctrl-C and SIGTERM are deferred, so the two
renames happen as one step; deleting the old venv comes after and resumes after a kill.
Recovery touches only ``new`` and ``old`` inside the state folder, never through a symlink.
One file lock per slot (in its state folder) serialises builds and verifications of the same
venv, whichever link they name it by.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from envkit.errors import BadInput, EnvironmentBroken, FileSystemError, UnreadableFile
from envkit.io import faults, process
from envkit.io.atomicfile import sweep_temporaries, write_atomic
from envkit.io.escaping import shell_command
from envkit.io.files import read_small_text
from envkit.wording import listed

MARKER = "envkit-build.json"
STATE_FOLDER = ".envkit"
# What the top level of a virtual environment holds (venv, virtualenv, uv; POSIX and
# Windows layouts), and what tools commonly add there. Nothing else.
VENV_ENTRIES = frozenset(
    {
        "pyvenv.cfg",
        "bin",
        "lib",
        "lib64",
        "include",
        "share",
        "etc",
        "man",
        "Scripts",
        "Lib",
        "Include",
        ".gitignore",
        "CACHEDIR.TAG",
        ".lock",
        MARKER,
        "envkit-constraints.txt",
    }
)


def _read_json(path: Path) -> dict[str, object] | None:
    try:  # envkit's own marker or journal: never a link, a FIFO or a large file
        data = json.loads(read_small_text(path, 1024 * 1024, what="marker", follow=False))
    except (UnreadableFile, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _write_json(path: Path, data: dict[str, object]) -> None:
    # envkit's own files (journal, marker): never written through a link planted there
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n", own=True)


def is_venv(path: Path) -> bool:
    return (path / "pyvenv.cfg").is_file()


def made_by_envkit(path: Path) -> bool:
    """A real folder holding a venv and envkit's marker with a build id."""
    if path.is_symlink() or not path.is_dir() or not is_venv(path):
        return False
    marker = _read_json(path / MARKER)
    return bool(marker and marker.get("build_id"))


def built_profile(path: Path) -> str | None:
    """The profile envkit's marker in the venv at ``path`` says it was built from, or None
    when there is no readable marker (a venv envkit did not build)."""
    marker = _read_json(path / MARKER)
    name = marker.get("profile") if marker else None
    return name if isinstance(name, str) and name else None


def unexpected_entries(path: Path) -> list[str]:
    """The top-level entries of ``path`` that no virtual environment holds."""
    return sorted(entry.name for entry in path.iterdir() if entry.name not in VENV_ENTRIES)


def _remove(path: Path) -> None:
    """Delete a link (never its target) or a folder envkit may delete (checked by callers)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _exists(path: Path) -> bool:
    return os.path.lexists(path)


class VenvSlot:
    """The venv at one path, with its lock, journal and scratch folders."""

    def __init__(self, venv: Path) -> None:
        self.venv = Path(os.path.abspath(venv))  # as the user named it: what messages show
        self.linked = self.venv.is_symlink()
        # where the environment lives and is swapped: the link's target for a symlink
        self.path = Path(os.path.realpath(self.venv)) if self.linked else self.venv
        self.state_root = self.path.parent / STATE_FOLDER
        self.state = self.state_root / self.path.name
        self.journal = self.state / "journal.json"
        self.staging = self.state / "new"
        self.backup = self.state / "old"
        self.committed = False  # set once this process's swap is done

    def check_replaceable(self) -> None:
        """Refuse (BadInput, exit 2) unless the venv path holds nothing envkit may not
        replace. Touches nothing."""
        venv = self.path
        here = Path(os.path.realpath(sys.prefix))
        if _exists(venv) and Path(os.path.realpath(venv)) == here:
            raise BadInput(
                f"{str(self.venv)!r} is the environment envkit itself is running from; "
                "replacing it would pull the floor from under this build.",
                "Install envkit elsewhere (pipx, or another venv) and build into --venv "
                "from there, or choose another --venv.",
            )
        if self.linked:
            self._check_link_target()
        if not _exists(venv):
            return
        if not venv.is_dir():
            raise BadInput(
                f"{self._named()!r} is a file, not a virtual environment; envkit will "
                "not replace it.",
                "Move it away or choose another --venv.",
            )
        try:
            extra = unexpected_entries(venv)
        except OSError as exc:
            raise FileSystemError(venv, exc, "read") from None
        if made_by_envkit(venv) or (is_venv(venv) and not extra) or not any(venv.iterdir()):
            return
        if not is_venv(venv):
            what = "is not a virtual environment (no pyvenv.cfg)"
        else:
            what = "holds more than a virtual environment"
        shown = listed(extra, 10)
        raise BadInput(
            f"{self._named()!r} {what}: it holds {shown}. envkit replaces only "
            "environments it made or folders holding nothing but a virtual environment; "
            "nothing was touched.",
            "Choose another --venv (a folder of its own, such as .venv), or move those "
            "entries away.",
        )

    def _named(self) -> str:
        """The venv as messages name it: the link and where it leads, for a symlink."""
        return f"{self.venv} -> {self.path}" if self.linked else str(self.venv)

    def _check_link_target(self) -> None:
        """A symlinked venv must lead to a folder, or to nothing in a folder that exists."""
        if self.path.is_symlink():  # realpath stops where a loop begins
            raise BadInput(
                f"--venv {str(self.venv)!r} is a symlink that never reaches a folder (a loop).",
                "Point the link at the environment's folder, or remove it.",
            )
        if not self.path.parent.is_dir():
            raise BadInput(
                f"--venv {str(self.venv)!r} is a symlink to {str(self.path)!r}, whose folder "
                "does not exist (a disk that is not mounted?); nothing was touched.",
                "Mount or create that folder, or point the link elsewhere.",
            )

    def _check_state_folder(self) -> None:
        for folder in (self.state_root, self.state):
            if folder.is_symlink():
                raise BadInput(
                    f"{str(folder)!r} is a symlink; envkit keeps its state only in a real "
                    "folder beside the venv and never follows a link out of it.",
                    "Remove the link, then run envkit again.",
                )

    @contextmanager
    def locked(
        self, on_wait: Callable[[str], None] | None = None, *, existing: str = ""
    ) -> Iterator[list[str]]:
        """Hold this venv's lock; first repair what a killed envkit left. Yields what was done.

        ``existing``: the profile a command checks a venv that is there against (verify);
        when neither it nor envkit's state beside it exists, BadInput naming the build of
        that profile into it, and nothing is created."""
        self._check_state_folder()
        if existing and not self.state.is_dir() and not is_venv(self.path):
            what = (
                "does not exist"
                if not _exists(self.path)
                else "is not a virtual environment (no pyvenv.cfg)"
            )
            build = shell_command(["envkit", "build", existing, "--venv", str(self.venv)])
            raise BadInput(
                f"{str(self.venv)!r} {what}, so there is no environment to check.",
                f"Build it first: {build}; or pass the venv's folder.",
            )
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
        except OSError as exc:
            raise FileSystemError(self.state / "lock", exc, "lock") from None
        try:
            yield self.recover()
        finally:
            lock.release()

    def recover(self) -> list[str]:
        """Finish or undo a build that was killed. Call with the lock held."""
        done: list[str] = []
        sweep_temporaries(self.state)
        journal = _read_json(self.journal)
        phase = str(journal.get("phase", "")) if journal else ""
        build_id = str(journal.get("build_id", "")) if journal else ""
        if phase == "swapping" and self._venv_build_id() == build_id:
            phase = "cleanup"
        if phase == "swapping" and not _exists(self.path) and _exists(self.backup):
            os.rename(self.backup, self.path)
            done.append(f"restored the previous environment at {self.venv}")
        if phase == "cleanup" and _exists(self.backup):
            self._remove_disposable(self.backup)
            done.append("removed the environment replaced by the last completed build")
        if _exists(self.staging):
            self._remove_disposable(self.staging)
            done.append(f"removed an unfinished build left by an interrupted envkit ({phase})")
        if _exists(self.backup):
            # No journal explains it: never delete an environment we cannot account for.
            raise EnvironmentBroken(
                f"Found an environment at {str(self.backup)!r} that no envkit journal accounts "
                f"for, next to {str(self.path)!r}.",
                f"Inspect both; keep the one you want at {self.path} and delete the other, "
                "then run envkit again.",
            )
        if journal is not None or _exists(self.journal):
            self.journal.unlink()
        return done

    def _remove_disposable(self, path: Path) -> None:
        """Remove ``new`` or ``old``: a link (not its target), an envkit venv, a venv-only
        folder or an unfinished build; refuse anything else."""
        if path.is_symlink() or not path.is_dir():
            _remove(path)
            return
        extra = unexpected_entries(path)
        if made_by_envkit(path) or not extra or path == self.staging:
            _remove(path)
            return
        raise EnvironmentBroken(
            f"{str(path)!r} holds {', '.join(extra[:10])}, which no virtual environment holds; "
            "envkit will not delete it.",
            "Inspect it and move what you need, then delete it and run envkit again.",
        )

    def _venv_build_id(self) -> str:
        if self.path.is_symlink():
            return ""
        marker = _read_json(self.path / MARKER)
        return str(marker.get("build_id", "")) if marker else ""

    def begin(self, build_id: str) -> Path:
        """Start a build: journal it, return the staging path. Call check_replaceable first."""
        self.check_replaceable()
        _write_json(self.journal, {"phase": "building", "build_id": build_id, "pid": os.getpid()})
        return self.staging

    def mark(self, build_id: str, marker: dict[str, object]) -> None:
        """Write envkit's marker into the staging venv (at creation, and again before the swap)."""
        _write_json(self.staging / MARKER, {**marker, "build_id": build_id})

    def commit(self, build_id: str, marker: dict[str, object]) -> bool:
        """Swap the verified staging venv in. Returns whether an environment was replaced.

        The journal's swapping phase and both renames run with Ctrl-C and SIGTERM deferred:
        a signal then arrives after the swap, while the old venv is being deleted.
        """
        self.mark(build_id, marker)
        self.check_replaceable()  # again: the venv may have changed during the build
        with process.signals_deferred():
            _write_json(
                self.journal, {"phase": "swapping", "build_id": build_id, "pid": os.getpid()}
            )
            faults.fault_point("swap-journaled")
            replaced = _exists(self.path)
            if replaced:
                os.rename(self.path, self.backup)
            faults.fault_point("swap-old-moved")
            os.rename(self.staging, self.path)
            faults.fault_point("swap-new-moved")
            _write_json(
                self.journal, {"phase": "cleanup", "build_id": build_id, "pid": os.getpid()}
            )
            self.committed = True
        faults.fault_point("swap-committed")
        if replaced:
            self._remove_disposable(self.backup)
        faults.fault_point("old-removed")
        self.journal.unlink()
        return replaced

    def abort(self) -> list[str]:
        """Drop a build that failed or was interrupted, at any step: the journal says which."""
        return self.recover()

    def describe(self) -> str:
        """What is at the venv path now, said truthfully (for an interrupted run's last line)."""
        if self.committed:
            text = f"The new, verified environment is at {self.venv}."
            if _exists(self.backup):
                text += (
                    " Deleting the previous one was cut short; the next envkit command on "
                    "this venv finishes it."
                )
            return text
        if _exists(self.path):
            text = f"The environment you had at {self.venv} is unchanged."
        else:
            text = f"Nothing was at {self.venv}, and nothing is."
        if _exists(self.staging):
            text += " The unfinished build is removed by the next envkit command on this venv."
        return text


def new_build_id() -> str:
    return f"{os.getpid()}-{time.time_ns()}"
