"""Whether exec will surely start a child's program (``io.process`` asks, before each spawn).

``io.process`` starts a child through a trampoline (util-linux's ``setpriv``) that sets the
parent-death signal and then execs the program. Popen raises what exec says of the
trampoline, not of the program: a program that cannot start would come back as the
trampoline's exit code 127 or 126. So the trampoline is taken only for a program exec will
start, found here as Popen finds it (the name itself when it holds a slash, else each folder
of the child's PATH in turn, relative ones from the child's folder; a file that does not
exist, is not a regular file or is not executable passed over, as exec passes over it), and
only when that file is an ELF program or a script whose ``#!`` interpreter is one. Anything
else (nothing found, an unreadable head, a script of a script) is started without the
trampoline, so that Popen raises exactly what it always did.

Left to the trampoline: an ELF program exec refuses (another machine's, its loader missing,
being written to), which this does not read that far to see.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

from envkit.errors import UnreadableFile
from envkit.io.files import open_regular

_ELF = b"\x7fELF"
_HEAD = 256  # the bytes of a script's first line the kernel reads (BINPRM_BUF_SIZE)
_SKIPPED, _SURE, _UNSURE = "skipped", "sure", "unsure"


def starts_surely(
    program: str, env: Mapping[str, str] | None = None, cwd: Path | str | None = None
) -> bool:
    """Whether exec will start ``program`` in a child given ``env`` (None: ours) and ``cwd``
    (None: ours), as Popen looks for it."""
    if not program:
        return False
    found = (program,) if os.path.dirname(program) else _on_path(program, env)
    for path in found:
        kind = _kind(os.path.join(cwd, path) if cwd is not None else path)
        if kind != _SKIPPED:  # exec starts the first file that is not passed over, or fails
            return kind == _SURE
    return False


def _on_path(program: str, env: Mapping[str, str] | None) -> tuple[str, ...]:
    return tuple(os.path.join(folder, program) for folder in os.get_exec_path(env))


def _kind(path: str) -> str:
    if not _executable(path):
        return _SKIPPED
    head = _head(path)
    if head.startswith(_ELF):
        return _SURE
    if head.startswith(b"#!") and b"\n" in head:  # the kernel's parse of the first line
        line = head[2 : head.index(b"\n")].lstrip(b" \t")
        interpreter = re.split(rb"[ \t\0]", line, maxsplit=1)[0]
        if interpreter.startswith(b"/") and _executable(os.fsdecode(interpreter)):
            return _SURE if _head(os.fsdecode(interpreter)).startswith(_ELF) else _UNSURE
    return _UNSURE


def _executable(path: str) -> bool:
    """A regular file we may execute (what exec does not pass over)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode) and os.access(path, os.X_OK)
    except (OSError, ValueError):  # ValueError: a NUL in the name
        return False


def _head(path: str) -> bytes:
    try:
        with open_regular(path, what="program") as file:
            return file.read(_HEAD)
    except (UnreadableFile, OSError):  # execute-only, or gone meanwhile: not known
        return b""
