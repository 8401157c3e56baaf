"""Reading the small files envkit is handed: profiles, model files, locks, markers, caches.

Every such file is read here, and only if it is what it claims to be: a regular file no
larger than the caller's cap. The checks come before any byte is read, on the opened file
itself (``fstat`` of the descriptor, so a file swapped after the check is still the one
checked): a profile that is a symlink to ``/dev/zero`` is refused instead of growing without
end, a FIFO is refused instead of blocking (it is opened with ``O_NONBLOCK``), and a file
that grows while it is read is cut off at ``cap + 1`` bytes and refused.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from envkit.errors import UnreadableFile

KiB = 1024
MiB = 1024 * KiB
_CHUNK = MiB
# never wait: a FIFO opens at once (and is then refused), a terminal is not adopted
_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)

# what kind of thing stands at a path that is not a regular file, for the message
_KINDS = (
    (stat.S_ISDIR, "is a folder"),
    (stat.S_ISFIFO, "is a named pipe (FIFO)"),
    (stat.S_ISCHR, "is a character device"),
    (stat.S_ISBLK, "is a block device"),
    (stat.S_ISSOCK, "is a socket"),
)


def read_small(path: Path | str, cap: int, *, what: str = "file", follow: bool = True) -> bytes:
    """The bytes of ``path``, a regular file of at most ``cap`` bytes.

    ``follow=False`` refuses a symbolic link (envkit's own files, such as cache entries,
    are never links). Raises :class:`UnreadableFile` (exit 2) saying why: missing, not a
    regular file, a link where none may be, larger than ``cap``, or not readable.
    """
    flags = _FLAGS if follow else _FLAGS | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise _refusal(path, exc, what, follow) from None
    try:
        info = _regular(fd, path, what)
        if info.st_size > cap:
            raise _too_large(path, info.st_size, cap, what)
        chunks: list[bytes] = []
        total = 0
        while total <= cap:
            chunk = os.read(fd, min(_CHUNK, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > cap:  # it grew while being read
            raise _too_large(path, total, cap, what)
        return b"".join(chunks)
    except OSError as exc:
        raise _refusal(path, exc, what, follow) from None
    finally:
        os.close(fd)


def open_regular(path: Path | str, *, what: str = "file") -> BinaryIO:
    """``path`` opened for reading in binary, if it is a regular file (of any size: a wheel
    on disk is read by range, never whole). UnreadableFile otherwise, before any read."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        raise _refusal(path, exc, what, True) from None
    try:
        _regular(fd, path, what)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_small_text(path: Path | str, cap: int, *, what: str = "file", follow: bool = True) -> str:
    """:func:`read_small`, decoded as UTF-8; UnreadableFile (``not-text``) when it is not."""
    data = read_small(path, cap, what=what, follow=follow)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UnreadableFile(path, "is not UTF-8 text (binary file?)", "not-text", what) from None


def _regular(fd: int, path: Path | str, what: str) -> os.stat_result:
    """The opened file's own status, if it is a regular file; UnreadableFile otherwise."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        kind = next((says for test, says in _KINDS if test(info.st_mode)), "is not a file")
        raise UnreadableFile(path, f"{kind}, not a regular file", "not-regular", what)
    return info


def _too_large(path: Path | str, size: int, cap: int, what: str) -> UnreadableFile:
    return UnreadableFile(
        path, f"is {size:,} bytes or more; envkit reads at most {cap:,}", "too-large", what
    )


def _refusal(path: Path | str, exc: OSError, what: str, follow: bool) -> UnreadableFile:
    if isinstance(exc, FileNotFoundError):
        return UnreadableFile(path, "does not exist", "missing", what)
    if isinstance(exc, IsADirectoryError):
        return UnreadableFile(path, "is a folder, not a regular file", "not-regular", what)
    if not follow and exc.errno in (errno.ELOOP, errno.EMLINK):
        return UnreadableFile(path, "is a symbolic link, not a regular file", "symlink", what)
    reason = exc.strerror or type(exc).__name__
    return UnreadableFile(path, f"cannot be read ({reason})", "unreadable", what)


def present(path: Path) -> bool:
    """Whether anything stands at ``path``, a dangling link included: what a reader then
    hands to :func:`read_small`, which says what is wrong with it, instead of skipping it
    (``Path.is_file`` is False for a FIFO, a device or a broken link alike)."""
    return path.exists() or path.is_symlink()
