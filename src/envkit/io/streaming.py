"""A long-running child started by ``io.process.stream``, in a process group of its own, envkit
a child subreaper meanwhile: its output read with a deadline, every process it started (in its
group or not: a ``setsid``, a double fork, found in ``/proc`` by ``io.procfs``) signalled and
stopped by :meth:`Streaming.stop`, a signal first and SIGKILL after a grace period.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envkit.io import procfs
from envkit.io.interrupts import drain_wakeups, signals_caught, woken_by_signals

_libc: Any = None

_PR_SET_CHILD_SUBREAPER = 36
_reaping = 0  # open Streamings: envkit is a subreaper while one is
_reaping_lock = threading.Lock()


def subreaper(on: bool) -> None:
    """Make envkit a child subreaper (Linux 3.4 on) while a streamed child runs: a process
    its child leaves behind (a double fork, a daemon) is then reparented to envkit, not to
    init, and stays findable. Off again once the last Streaming is closed."""
    global _reaping, _libc
    with _reaping_lock:
        _reaping += 1 if on else -1
        if (_reaping == 1 if on else _reaping == 0) and sys.platform.startswith("linux"):
            if _libc is None:
                import ctypes

                _libc = ctypes.CDLL(None)
            _libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)


READ_SIZE = 64 * 1024
KILL_WAIT = 5.0  # seconds for the kernel to end a group after SIGKILL


@dataclass(frozen=True)
class Stopped:
    """How a child and everything it started were ended: ``signal`` the last one sent (''
    when all had ended by themselves), after ``seconds``, and the processes of it still
    alive (none, normally)."""

    signal: str
    seconds: float
    left: tuple[int, ...]


class Streaming:
    """A child started by :func:`stream`: read its output with a deadline, ask which of the
    processes it started still run, signal them, stop them.

    What counts as the child's (Linux, from ``/proc``), each process known by its pid and
    start time so that a pid used again by another process is never signalled:

    - the child and every process below it by parent links;
    - every process of its process group;
    - every process reparented to envkit (a subreaper while the child runs) that started
      after the child: only a descendant of a child of envkit is reparented to it, and
      envkit starts nothing else while it streams;
    - every process seen as one of these before (a double fork's grandchild once its parent
      has exited), and what is below those.
    """

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.pgid = proc.pid  # the child leads its group (setpgid before exec)
        assert proc.stdout is not None
        self._out = proc.stdout
        self._eof = False
        self._closed = False
        self._linux = procfs.available()
        first = procfs.stat(self.pid) if self._linux else None
        self._start = first.start if first is not None else 0
        self._seen: dict[int, int] = {self.pid: self._start}  # pid -> start time
        self._signalled: set[tuple[int, int, str]] = set()

    def read(self, timeout: float) -> bytes | None:
        """What the child wrote within ``timeout`` seconds (at most READ_SIZE bytes): None
        when nothing came, ``b""`` once every writer closed the pipe. A signal ends the wait
        at once, whichever thread takes it (io.interrupts.woken_by_signals): its handler
        runs at the next bytecode, and a handler that only records it finds None here."""
        if self._eof:
            return b""
        with woken_by_signals() as woken:
            watched: list[Any] = [self._out] if woken is None else [self._out, woken]
            ready, _w, _x = select.select(watched, [], [], max(0.0, timeout))
            if woken is not None and woken in ready:
                drain_wakeups(woken)
        if self._out not in ready:
            return None
        data = os.read(self._out.fileno(), READ_SIZE)
        self._eof = not data
        return data

    @property
    def eof(self) -> bool:
        return self._eof

    def returncode(self) -> int | None:
        """The child's exit code once it has ended (it is reaped here), else None."""
        return self.proc.poll()

    def wait(self, timeout: float) -> int | None:
        """The child's exit code once it ends within ``timeout`` seconds, else None."""
        try:
            return self.proc.wait(timeout=max(0.0, timeout))
        except subprocess.TimeoutExpired:
            return None

    def track(self) -> dict[int, procfs.Proc]:
        """Look at ``/proc`` once: every process of the child's (see the class), alive or a
        zombie, by pid. Reaps the zombies reparented to envkit."""
        me = os.getpid()
        mine = procfs.family(self.pid, self._start, self.pgid, self._seen, me)
        self._seen = {pid: p.start for pid, p in mine.items()} | {self.pid: self._start}
        for pid, p in mine.items():
            if not p.alive and p.ppid == me and pid != self.pid:  # Popen reaps its own
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
        return mine

    def members(self) -> tuple[int, ...]:
        """The live processes of the child's (zombies do not count: they run nothing)."""
        self.proc.poll()
        if not self._linux:  # pragma: no cover - no /proc: the group alone
            try:
                os.killpg(self.pgid, 0)
            except (ProcessLookupError, PermissionError):
                return ()
            return (self.pgid,)
        return tuple(sorted(pid for pid, p in self.track().items() if p.alive))

    def holds_port(self, port: int) -> bool | None:
        """Whether a live process of the child's listens on TCP ``port``; None where
        ``/proc`` cannot say."""
        if not self._linux:  # pragma: no cover - not Linux
            return None
        return any(True for _ in procfs.holders(procfs.listening(port), self.members()))

    def send(self, sig: signal.Signals, *, again: bool = True) -> bool:
        """Send ``sig`` to every live process of the child's (``again=False``: only to
        those that have not had it yet); False when none is left."""
        if not self._linux:  # pragma: no cover - not Linux
            try:
                os.killpg(self.pgid, sig)
            except (ProcessLookupError, PermissionError):
                return False
            return True
        live = {pid: p for pid, p in self.track().items() if p.alive}
        if again and any(p.pgrp == self.pgid for p in live.values()):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, sig)  # at once: a member forking meanwhile is in it too
        for pid, p in live.items():
            if not again and (pid, p.start, sig.name) in self._signalled:
                continue
            now = procfs.stat(pid)
            if now is not None and now.start == p.start:  # not ended, its pid not reused
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            self._signalled.add((pid, p.start, sig.name))
        return bool(live)

    def stop(
        self,
        grace: float,
        *,
        first: signal.Signals = signal.SIGTERM,
        drain: Callable[[bytes], None] | None = None,
    ) -> Stopped:
        """End the child and every process of it: ``first`` (SIGTERM, or the interrupt
        being passed on), then SIGKILL to what still runs after ``grace`` seconds. Output
        written meanwhile goes to ``drain`` (so a child logging its shutdown never blocks on
        a full pipe). A KeyboardInterrupt while waiting kills them at once and is raised
        again."""
        start = time.monotonic()
        if not self.members():
            self.proc.poll()
            return Stopped("", 0.0, ())
        sent = first.name
        try:
            self.send(first)
            if not self._gone_by(start + grace, drain, first):
                sent = "SIGKILL"
                self.send(signal.SIGKILL)
                self._gone_by(time.monotonic() + KILL_WAIT, drain, signal.SIGKILL)
        except KeyboardInterrupt:
            self.send(signal.SIGKILL)
            self._gone_by(time.monotonic() + KILL_WAIT, None, signal.SIGKILL)
            raise
        return Stopped(sent, time.monotonic() - start, self.members())

    def _gone_by(
        self, deadline: float, drain: Callable[[bytes], None] | None, sig: signal.Signals
    ) -> bool:
        while True:
            if not self.members():  # what it wrote on its way out, without waiting for more
                for _ in range(64 if drain is not None else 0):  # at most 4 MiB
                    if not (data := self.read(0)) or drain is None:
                        break
                    drain(data)
                return True
            if self._linux:
                self.send(sig, again=False)  # to what started meanwhile
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self._eof:
                time.sleep(min(0.02, left))  # bounded by the deadline
                continue
            data = self.read(min(0.05, left))
            if data and drain is not None:
                drain(data)

    def close(self) -> None:
        with signals_caught():  # an interrupt here never leaves envkit a subreaper
            self._out.close()
            if not self._closed:
                self._closed = True
                subreaper(False)
