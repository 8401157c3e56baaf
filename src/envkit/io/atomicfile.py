"""Files that are never half written: write aside, flush to disk, rename over the target.

A reader (or a later envkit after a kill) sees the old file or the new one. Every file
envkit publishes or relies on (profiles, locks, journals, caches) is written here. The file
written aside is named after the writing process (``.NAME.PID.tmp``), so a later write of the
same file sweeps what a killed writer left.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from envkit.errors import FileSystemError
from envkit.io.process import fault_point


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


def write_atomic(path: Path, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` in one rename; the temporary file never outlives us.

    Raises FileSystemError (exit 2) when the folder cannot be written or the disk is full;
    the previous file is then untouched.
    """
    sweep_temporaries(path.parent, path.name)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        fault_point("atomic-written")
        os.replace(tmp, path)
    except OSError as exc:
        raise FileSystemError(path, exc) from None
    finally:
        try:
            if tmp.exists():
                tmp.unlink()
        except OSError:
            pass


_TEMP_PREFIX = "envkit-"
_TEMP_KINDS = ("lock", "check", "facts")  # every scratch folder envkit makes is one of these


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
    try:
        entries = [e for e in root.iterdir() if e.name.startswith(_TEMP_PREFIX)]
    except OSError:
        return
    for entry in entries:
        parts = entry.name.split("-")
        if len(parts) < 4 or parts[1] not in _TEMP_KINDS:
            continue  # not a name envkit gives its scratch folders
        if not (parts[2].isascii() and parts[2].isdigit()):
            continue
        if pid_alive(int(parts[2])) or entry.is_symlink() or not entry.is_dir():
            continue
        shutil.rmtree(entry, ignore_errors=True)
