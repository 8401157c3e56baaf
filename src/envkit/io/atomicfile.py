"""Files that are never half written: write aside, flush to disk, rename over the target.

A reader (or a later envkit after a kill) sees the old file or the new one. Every file
envkit publishes or relies on (profiles, locks, journals, caches) is written here. The file
written aside is named after the writing process (``.NAME.PID.tmp``), so a later write of the
same file sweeps what a killed writer left. A symlinked file stays a link (the file it leads
to is replaced) and a file keeps its permission bits. Files several processes read, change
and write back (``index.json``, ``lock.json``) are changed under :func:`held`, a file lock.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, TextIO

from envkit.errors import BadInput, FileSystemError
from envkit.io.faults import fault_point


def pid_alive(pid: int) -> bool:
    """Whether a process with this id runs (ours counts; a zombie or a stranger's does too)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_temporaries(folder: Path, name: str = "") -> None:
    """Remove ``.NAME.PID.tmp`` files in ``folder`` whose writer no longer runs: those of
    ``name`` only (a file envkit writes there), or every one in a folder that is envkit's
    own (``name`` empty). A file of that shape that envkit did not write is left alone."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    prefix = f".{name}." if name else "."
    for entry in entries:
        found = entry.name
        if not (found.startswith(prefix) and found.endswith(".tmp")):
            continue
        pid = found[len(prefix) : -len(".tmp")] if name else found[:-4].rpartition(".")[2]
        if pid.isascii() and pid.isdigit() and not pid_alive(int(pid)):
            try:
                if entry.is_file() and not entry.is_symlink():
                    entry.unlink()
            except OSError:
                pass


def _aside(target: Path) -> Path:
    """Where this process writes ``target`` before the rename (``.NAME.PID.tmp``, which
    :func:`sweep_temporaries` knows by its shape)."""
    return target.with_name(f".{target.name}.{os.getpid()}.tmp")


def write_atomic(path: Path, data: str | bytes, *, own: bool = False) -> None:
    """Replace the file at ``path`` with ``data`` in one rename; the temporary file never
    outlives us.

    A symlink stays a symlink: the file it leads to is replaced, written aside in that file's
    own folder (a rename never crosses file systems), so a profile linked from a shared
    folder is the one updated. ``own``: a file only envkit writes (a journal, a build
    marker), which is never written through a link: a link there is replaced. The file keeps
    its permission bits (a 0600 profile stays 0600) and, where allowed, its owner and group;
    a new file gets the usual ones (0666 less the umask). Nothing else can read the data
    before it has the file's own bits.

    Raises FileSystemError (exit 2) when the folder cannot be written or the disk is full,
    BadInput when ``path`` (or what it links to) is not a regular file, is a link loop or a
    link into a folder that does not exist; the previous file is then untouched.
    """
    try:
        target = path if own else write_target(path)
    except OSError as exc:
        raise FileSystemError(path, exc) from None
    sweep_temporaries(target.parent, target.name)
    tmp = _aside(target)
    try:
        kept = None if own else _existing(target)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(tmp, flags, 0o600 if kept is not None else 0o666)
        with open(fd, "wb") as fh:
            if kept is not None:
                _keep_mode_and_owner(fd, kept)
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        fault_point("atomic-written")
        os.replace(tmp, target)
    except OSError as exc:
        raise FileSystemError(path, exc) from None
    finally:
        try:
            if os.path.lexists(tmp):
                tmp.unlink()
        except OSError:
            pass


def write_target(path: Path) -> Path:
    """The file a write of ``path`` replaces: ``path`` itself, or the file its symlinks
    lead to. BadInput for a link loop, a link into a missing folder, or anything there
    that is not a regular file (a folder, a FIFO, a device)."""
    target = path
    if os.path.islink(path):
        target = Path(os.path.realpath(path))
        if os.path.islink(target):  # realpath stops where a loop begins
            raise BadInput(
                f"{str(path)!r} is a symlink that never reaches a file (a loop); nothing "
                "was written.",
                "Point the link at the file it stands for, or replace it with the file.",
            )
        if not target.parent.is_dir():
            raise BadInput(
                f"{str(path)!r} is a symlink to {str(target)!r}, whose folder does not "
                "exist; nothing was written.",
                "Mount or create that folder, or point the link elsewhere.",
            )
    found = _existing(target)
    if found is not None and not stat.S_ISREG(found.st_mode):
        raise BadInput(
            f"{str(path)!r} is not a regular file; envkit writes only regular files.",
            "Move it away or choose another path.",
        )
    return target


def writable(path: Path) -> Path:
    """:func:`write_target` of ``path``, checked before a long piece of work that ends by
    writing it: a file the write's own kind (``.NAME.PID.tmp``) is made in its folder and
    removed at once, so a folder that is missing, read-only or full fails now, not after
    the work. FileSystemError or BadInput, with nothing written."""
    target = write_target(path)
    if not target.parent.is_dir():
        raise BadInput(
            f"{str(path)!r} cannot be written: the folder {str(target.parent)!r} does not "
            "exist; nothing was read or written.",
            "Create the folder, or give a path in one that exists.",
        )
    tmp = _aside(target)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(tmp, flags, 0o600)
    except FileExistsError:
        return target  # one of that name is there (a dead writer's): the folder takes files
    except OSError as exc:
        raise FileSystemError(path, exc) from None
    os.close(fd)
    tmp.unlink()
    return target


def _existing(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _keep_mode_and_owner(fd: int, was: os.stat_result) -> None:
    """Give the file written aside the replaced file's permission bits, and its owner and
    group where this process may (root rewriting a user's file; a setgid folder's group)."""
    os.fchmod(fd, stat.S_IMODE(was.st_mode))
    now = os.fstat(fd)
    if (now.st_uid, now.st_gid) != (was.st_uid, was.st_gid):
        with contextlib.suppress(OSError):
            os.fchown(fd, was.st_uid, was.st_gid)


@contextmanager
def held(path: Path, *, wait: float = 120.0, folder: Path | None = None) -> Iterator[None]:
    """Hold the file lock of the shared file ``path`` across a read-modify-write of it
    (``index.json``, ``lock.json``): another envkit process doing the same waits, so no
    writer's changes are lost. The lock file is ``.NAME.lock`` beside the file (beside the
    file a symlink leads to), or in ``folder`` (an existing one) when given, kept for the
    next writer; the kernel releases it when a holder dies, so a kill never leaves it held.

    Raises BadInput when another process holds it for more than ``wait`` seconds, and
    FileSystemError when the lock file cannot be made (a read-only folder).
    """
    from filelock import FileLock, Timeout  # 0.1 s to import: only where a lock is taken

    real = Path(os.path.realpath(path))
    lock_path = (folder or real.parent) / f".{real.name}.lock"
    lock = FileLock(str(lock_path))
    fault_point("file-lock")
    try:
        lock.acquire(timeout=wait)
    except Timeout:
        raise BadInput(
            f"Another envkit process has been writing {str(path)!r} for over {wait:.0f} s.",
            "Let it finish (or end it), then run the command again.",
        ) from None
    except OSError as exc:
        raise FileSystemError(lock_path, exc, "lock") from None
    try:
        yield
    finally:
        lock.release()


_TEMP_PREFIX = "envkit-"
_TEMP_KINDS = (
    "lock",
    "check",
    "facts",
    "kernels",
    "image",
)  # every scratch folder envkit makes is one of these


@contextmanager
def temporary_folder(what: str) -> Iterator[Path]:
    """A scratch folder named after this process (``envkit-WHAT-PID-...``), removed after
    use; one a killed envkit left is swept by :func:`sweep_temporary_folders`."""
    assert what in _TEMP_KINDS, what
    with tempfile.TemporaryDirectory(prefix=f"{_TEMP_PREFIX}{what}-{os.getpid()}-") as tmp:
        yield Path(tmp)


def sweep_temporary_folders() -> None:
    """Remove envkit's scratch folders whose process no longer runs."""
    root = Path(tempfile.gettempdir())
    try:  # names, not paths: every command lists a shared folder of hundreds of entries
        with os.scandir(root) as listing:
            names = [e.name for e in listing if e.name.startswith(_TEMP_PREFIX)]
    except OSError:
        return
    for name in names:
        entry = root / name
        parts = name.split("-")
        if len(parts) < 4 or parts[1] not in _TEMP_KINDS:
            continue  # not a name envkit gives its scratch folders
        if not (parts[2].isascii() and parts[2].isdigit()):
            continue
        if pid_alive(int(parts[2])) or entry.is_symlink() or not entry.is_dir():
            continue
        shutil.rmtree(entry, ignore_errors=True)


def open_new(path: Path, mode: int = 0o600) -> TextIO | None:
    """A file that did not exist, created owner-only for streaming text into (a log that
    grows as a child writes); None when ``path`` already exists. Never opens an existing file,
    and never follows a link at ``path``."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    except FileExistsError:
        return None
    return open(fd, "w", encoding="utf-8", newline="", buffering=1)


def create_binary(path: Path, mode: int = 0o600) -> BinaryIO | None:
    """A file that did not exist, created owner-only for streaming bytes into (a kernel
    library inflated out of a wheel); None when ``path`` already exists. Never opens an
    existing file, and never follows a link at ``path``."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    except FileExistsError:
        return None
    return open(fd, "wb")
