"""What Linux's ``/proc`` says about processes and listening sockets (``io.process`` tracks
the processes a streamed child started; ``serve`` asks who holds a port).

Everything is read as bytes under a cap through ``io.files`` (a process may name itself
with bytes that are not UTF-8: it must not hide by that). A process that ends while it is
being read is skipped; what this user may not read (another user's open files) is simply
not known. Every function returns nothing useful off Linux (no ``/proc``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from envkit.errors import UnreadableFile
from envkit.io.files import read_small

PROC = Path("/proc")
_STAT_CAP = 4096
_NET_CAP = 16 * 1024 * 1024  # /proc/net/tcp: about 150 bytes a socket
_LISTEN = "0A"  # the TCP state LISTEN in /proc/net/tcp
_MAX_FDS = 65536  # fds looked at per process


@dataclass(frozen=True)
class Proc:
    """One process as ``/proc/PID/stat`` gives it: ``start`` (clock ticks after boot) tells
    it from a later process given the same pid."""

    pid: int
    state: str
    ppid: int
    pgrp: int
    start: int

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X")  # a zombie runs nothing


def available() -> bool:
    return (PROC / "self" / "stat").exists()


def stat(pid: int) -> Proc | None:
    """The process ``pid`` now, or None when there is none (or it cannot be read)."""
    try:
        raw = read_small(PROC / str(pid) / "stat", _STAT_CAP, what="process status")
    except (UnreadableFile, OSError):
        return None
    fields = raw.rsplit(b")", 1)[-1].split()  # after "pid (name)": state ppid pgrp ...
    try:
        return Proc(pid, fields[0].decode("ascii"), int(fields[1]), int(fields[2]), int(fields[19]))
    except (IndexError, ValueError, UnicodeDecodeError):
        return None


def processes() -> dict[int, Proc]:
    """Every process this user can see, by pid."""
    found: dict[int, Proc] = {}
    try:
        entries = list(os.scandir(PROC))
    except OSError:
        return found
    for entry in entries:
        if entry.name.isdigit() and (proc := stat(int(entry.name))) is not None:
            found[proc.pid] = proc
    return found


def descendants(roots: Iterable[int], table: Mapping[int, Proc]) -> set[int]:
    """``roots`` and every pid below them by parent links in ``table``."""
    children: dict[int, list[int]] = {}
    for proc in table.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    seen = set(roots)
    todo = list(seen)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen


def name(pid: int) -> str:
    """The process's name (``comm``: its program's, at most 15 characters), '' when not
    visible. Not its command line: that may carry another program's credentials."""
    try:
        raw = read_small(PROC / str(pid) / "comm", _STAT_CAP, what="process name")
    except (UnreadableFile, OSError):
        return ""
    return raw.decode("utf-8", "replace").strip()[:64]


def listening(port: int) -> set[int]:
    """The inodes of the TCP sockets listening on ``port`` (IPv4 and IPv6, any address)."""
    inodes: set[int] = set()
    for table in ("tcp", "tcp6"):
        try:
            raw = read_small(PROC / "net" / table, _NET_CAP, what="socket table")
        except (UnreadableFile, OSError):
            continue
        for line in raw.decode("ascii", "replace").splitlines()[1:]:
            # sl local_address rem_address st queues timer retransmits uid timeout inode
            cols = line.split()
            if len(cols) < 10 or cols[3] != _LISTEN:
                continue
            _addr, _colon, hex_port = cols[1].rpartition(":")
            try:
                if int(hex_port, 16) == port and int(cols[9]) > 0:
                    inodes.add(int(cols[9]))
            except ValueError:
                continue
    return inodes


def holders(inodes: set[int], pids: Iterable[int] | None = None) -> Iterator[int]:
    """The pids (of ``pids``, else of every process whose open files this user may read)
    that hold one of the sockets ``inodes``."""
    if not inodes:
        return
    wanted = {f"socket:[{inode}]" for inode in inodes}
    candidates = list(pids) if pids is not None else [int(p) for p in _pids()]
    for pid in candidates:
        try:
            with os.scandir(PROC / str(pid) / "fd") as fds:
                for n, fd in enumerate(fds):
                    if n >= _MAX_FDS:
                        break
                    try:
                        target = os.readlink(fd.path)
                    except OSError:
                        continue
                    if target in wanted:
                        yield pid
                        break
        except OSError:  # ended, or another user's: not visible
            continue


def _pids() -> list[str]:
    try:
        return [e.name for e in os.scandir(PROC) if e.name.isdigit()]
    except OSError:
        return []


def family(child: int, start: int, pgid: int, seen: Mapping[int, int], me: int) -> dict[int, Proc]:
    """The processes of a child started at ``start`` (see ``io.streaming.Streaming``): the
    child, its group, the processes reparented to ``me`` that started after it, those
    ``seen`` before (pid -> start time), and every process below these."""
    table = processes()
    roots = {
        pid
        for pid, p in table.items()
        if p.start >= start
        and (seen.get(pid) == p.start or p.pgrp == pgid or (p.ppid == me and pid != child))
    }
    if (first := table.get(child)) is not None and first.start == start:
        roots.add(child)
    found = descendants(roots, table)
    return {pid: table[pid] for pid in found if pid in table and table[pid].start >= start}
