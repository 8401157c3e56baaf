"""Child processes and interrupts: every subprocess envkit starts goes through :func:`run`.

Two things make this more than ``subprocess.run``:

- Ctrl-C and SIGTERM are never lost. Python raises KeyboardInterrupt wherever the main
  thread is; raised inside ``fork``'s hooks it is printed as a traceback and swallowed, and a
  build would go on. So signals are held while a child is spawned, and the handler also
  records the request for :func:`checkpoint`.
- A child dies with envkit (Linux parent-death signal): a killed build never leaves uv
  writing into a folder that recovery is about to remove.

What a child writes is read within a cap (:data:`OUTPUT_CAP` bytes a stream, by default):
a child that prints without end (an interpreter whose sitecustomize.py writes gigabytes) is
stopped at it with :class:`~envkit.errors.OutputTooLarge`, never held whole.

Work that runs children from several threads at once (the lock matrix) gives its pool
:func:`one_cpu_per_worker`, so the children do not oversubscribe the cores.

A long-running child whose output is watched as it comes (``envkit serve`` runs vLLM) is
started with :func:`stream`, in a process group of its own, envkit a child subreaper
meanwhile: its output is read with a deadline (:class:`Streaming`; ``io.pieces`` cuts it
into bounded lines), and :meth:`Streaming.stop` ends every process it started (its group,
and those that left it by ``setsid`` or a double fork, found in ``/proc`` by ``io.procfs``),
a signal first and SIGKILL after a grace period.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envkit.errors import OutputTooLarge
from envkit.io import procfs
from envkit.io.interrupts import SIGNALS as _SIGNALS
from envkit.io.interrupts import checkpoint as checkpoint
from envkit.io.interrupts import install_signal_handlers as install_signal_handlers
from envkit.io.interrupts import last_signal as last_signal
from envkit.io.interrupts import signals_deferred as signals_deferred
from envkit.io.interrupts import signals_held as _signals_held

_PR_SET_PDEATHSIG = 1
_libc: Any = None  # loaded once in the parent: a child has no time to load libraries


def _child_setup() -> None:  # pragma: no cover - runs in the child, before exec
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)  # inherited from _signals_held
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _load_libc() -> None:
    global _libc
    if _libc is None and sys.platform.startswith("linux"):
        import ctypes

        _libc = ctypes.CDLL(None)


def one_cpu_per_worker(workers: int) -> Callable[[], None]:
    """A thread-pool initializer: children started from each worker thread run on one CPU.

    Several multi-threaded children at once (uv runs its resolver beside its own runtime)
    oversubscribe the cores: each then spends a fifth more CPU time on hand-offs than it
    does alone. Each worker takes the next allowed CPU in turn, and the children it starts
    inherit that. Does nothing for one worker, on one CPU, or where affinity cannot be set.
    """
    getaffinity = getattr(os, "sched_getaffinity", None)  # Linux only
    setaffinity = getattr(os, "sched_setaffinity", None)
    cpus = sorted(getaffinity(0)) if getaffinity and setaffinity else []
    if workers < 2 or len(cpus) < 2 or setaffinity is None:
        return lambda: None
    turn = itertools.count()
    lock = threading.Lock()

    def pin() -> None:
        with lock:
            cpu = cpus[next(turn) % len(cpus)]
        with contextlib.suppress(OSError):
            setaffinity(0, {cpu})  # 0: the calling thread only

    return pin


@dataclass(frozen=True)
class Completed:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


OUTPUT_CAP = 16 * 1024 * 1024  # bytes of each stream of a child that run() keeps, by default


def run(
    args: Sequence[str],
    *,
    capture: bool = True,
    merge_stderr: bool = False,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    cwd: Path | None = None,
    max_output: int = OUTPUT_CAP,
) -> Completed:
    """Run a child to its end. Without ``capture`` it writes to our terminal; with it, its
    output is decoded as UTF-8 (a bad byte shown as U+FFFD) with universal newlines.

    Raises OSError when the program cannot start, subprocess.TimeoutExpired after ``timeout``
    (the child is killed), OutputTooLarge when it writes more than ``max_output`` bytes to
    stdout or stderr (the child is stopped there), and KeyboardInterrupt on Ctrl-C (the child
    is stopped first).
    """
    proc: subprocess.Popen[bytes] | None = None
    _load_libc()
    try:
        with _signals_held():
            proc = subprocess.Popen(
                list(args),
                stdout=subprocess.PIPE if capture else None,
                stderr=(subprocess.STDOUT if merge_stderr else subprocess.PIPE)
                if capture
                else None,
                stdin=subprocess.DEVNULL,
                env=None if env is None else dict(env),
                cwd=cwd,
                preexec_fn=_child_setup if os.name == "posix" else None,
            )
        out, err = _collect(proc, args, timeout, max_output)
    except BaseException:
        if proc is not None:
            _stop(proc)
        raise
    checkpoint()
    return Completed(tuple(args), proc.returncode, _text(out), _text(err))


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")


def _collect(
    proc: subprocess.Popen[bytes], args: Sequence[str], timeout: float | None, cap: int
) -> tuple[bytes, bytes]:
    """Both pipes read as the child writes them, each within ``cap`` bytes, then the child
    waited for: within ``timeout`` seconds from here, all of it."""
    ends = None if timeout is None else time.monotonic() + timeout
    kept = {"stdout": bytearray(), "stderr": bytearray()}
    pipes = {p.fileno(): (name, p) for name, p in (("stdout", proc.stdout), ("stderr", proc.stderr))
             if p is not None}  # fmt: skip
    try:
        while pipes:
            left = None if ends is None else ends - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(list(args), timeout or 0)
            ready, _w, _x = select.select(list(pipes), [], [], left)
            for fd in ready:
                name, pipe = pipes[fd]
                data = os.read(fd, READ_SIZE)
                if not data:
                    pipe.close()
                    del pipes[fd]
                    continue
                kept[name] += data
                if len(kept[name]) > cap:
                    raise OutputTooLarge(str(args[0]), name, cap)
    finally:  # a child stopped early gets EPIPE; none of its pipes is left open
        for _name, pipe in pipes.values():
            pipe.close()
    left = None if ends is None else max(0.0, ends - time.monotonic())
    proc.wait(timeout=left)
    return bytes(kept["stdout"]), bytes(kept["stderr"])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _group_child_setup() -> None:  # pragma: no cover - runs in the child, before exec
    os.setpgid(0, 0)  # a group of its own: envkit signals all of it, and Ctrl-C reaches only us
    _child_setup()


_PR_SET_CHILD_SUBREAPER = 36
_reaping = 0  # open Streamings: envkit is a subreaper while one is
_reaping_lock = threading.Lock()


def _subreaper(on: bool) -> None:
    """Make envkit a child subreaper (Linux 3.4 on) while a streamed child runs: a process
    its child leaves behind (a double fork, a daemon) is then reparented to envkit, not to
    init, and stays findable. Off again once the last Streaming is closed."""
    global _reaping
    with _reaping_lock:
        _reaping += 1 if on else -1
        if _libc is not None and (_reaping == 1 if on else _reaping == 0):
            _libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)


def stream(
    args: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> Streaming:
    """Start a long-running child in a process group of its own, its stdout and stderr
    merged into one pipe that :meth:`Streaming.read` reads as it is written. The child dies
    with envkit, as with :func:`run`; every process it starts, in its group or not (a
    ``setsid``, a double fork), is ended by :meth:`Streaming.stop`.

    Raises OSError when the program cannot start.
    """
    _load_libc()
    proc: subprocess.Popen[bytes] | None = None
    _subreaper(True)
    try:
        with _signals_held():
            proc = subprocess.Popen(
                list(args),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=None if env is None else dict(env),
                cwd=cwd,
                bufsize=0,
                preexec_fn=_group_child_setup if os.name == "posix" else None,
            )
    except BaseException:  # an interrupt held during the spawn arrives here
        if proc is None:
            _subreaper(False)
        else:
            child = Streaming(proc)
            child.stop(1.0)
            child.close()
        raise
    return Streaming(proc)


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
        when nothing came, ``b""`` once every writer closed the pipe."""
        if self._eof:
            return b""
        ready, _w, _x = select.select([self._out], [], [], max(0.0, timeout))
        if not ready:
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
        self._out.close()
        if not self._closed:
            self._closed = True
            _subreaper(False)
