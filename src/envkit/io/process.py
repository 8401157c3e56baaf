"""Child processes and interrupts: every subprocess envkit starts goes through :func:`run`.

Two things make this more than ``subprocess.run``:

- Ctrl-C and SIGTERM are never lost. Python raises KeyboardInterrupt wherever the main
  thread is; raised in the middle of a spawn it would leave a child no one stops. So a
  signal arriving during a spawn is delivered after it, and the handler also records the
  request for :func:`checkpoint`.
- A child dies with envkit (Linux parent-death signal, SIGKILL, set before its program
  runs): a killed build never leaves uv writing into a folder that recovery is about to
  remove. A child is started by vfork (a fork copies envkit's page tables: about 20 ms of
  CPU a child, against 1.7, in a parent holding 300 MB; docs/benchmarks.md) through
  util-linux's ``setpriv --pdeathsig KILL``, which sets the signal and execs the program,
  when ``io.programs`` says the program will start (else Popen could not raise what its
  exec says); otherwise, or without a setpriv that does this (:func:`setpriv`), it is
  forked and sets the signal itself.

What a child writes is read within a cap (:data:`OUTPUT_CAP` bytes a stream, by default):
a child that prints without end (an interpreter whose sitecustomize.py writes gigabytes) is
stopped at it with :class:`~envkit.errors.OutputTooLarge`, never held whole.

Work that runs children from several threads at once (the lock matrix) gives its pool
:func:`one_cpu_per_worker`, so the children do not oversubscribe the cores.

A long-running child whose output is watched as it comes (``envkit serve`` runs vLLM) is
started with :func:`stream`, in a process group of its own, envkit a child subreaper
meanwhile: a :class:`~envkit.io.streaming.Streaming` reads its output with a deadline
(``io.pieces`` cuts it into bounded lines) and ends every process it started.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import select
import shutil
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
from envkit.io import programs
from envkit.io.interrupts import SIGNALS as _SIGNALS
from envkit.io.interrupts import checkpoint as checkpoint
from envkit.io.interrupts import drain_wakeups as _drain_wakeups
from envkit.io.interrupts import install_signal_handlers as install_signal_handlers
from envkit.io.interrupts import last_signal as last_signal
from envkit.io.interrupts import signals_caught as _signals_caught
from envkit.io.interrupts import signals_deferred as signals_deferred
from envkit.io.interrupts import woken_by_signals as _woken_by_signals
from envkit.io.streaming import READ_SIZE, subreaper
from envkit.io.streaming import Stopped as Stopped
from envkit.io.streaming import Streaming as Streaming

_PR_SET_PDEATHSIG = 1
_libc: Any = None  # loaded once in the parent: a child has no time to load libraries
SETPRIV_VARIABLE = "ENVKIT_SETPRIV"  # the setpriv to start children through; empty: none


def _child_setup() -> None:  # pragma: no cover - runs in the child, before exec
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)  # whatever the spawning thread had
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def setpriv() -> str | None:
    """The setpriv children are started through: ``ENVKIT_SETPRIV`` (a path; empty for
    none, which starts every child forked), else the one on PATH; None when there is none
    or it does not set the parent-death signal (before util-linux 2.33), tried once."""
    return _setpriv(os.environ.get(SETPRIV_VARIABLE))


@functools.cache
def _setpriv(named: str | None) -> str | None:
    found = shutil.which("setpriv") if named is None else named
    if not found or not sys.platform.startswith("linux"):
        return None
    try:  # it sets the signal and execs what follows "--": itself, to say its version
        tried = subprocess.run(
            [found, "--pdeathsig", "KILL", "--", found, "--version"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return found if tried.returncode == 0 else None


def _popen(
    args: Sequence[str],
    *,
    group: bool,
    stdout: int | None,
    stderr: int | None,
    env: Mapping[str, str] | None,
    cwd: Path | None,
) -> subprocess.Popen[bytes]:
    """The child started: by vfork through setpriv (``group``: leading a process group of
    its own), else forked, setting its parent-death signal (and group) itself."""
    argv, held = list(args), set()
    trampoline = setpriv() if os.name == "posix" else None
    vfork = bool(trampoline) and (not group or sys.version_info >= (3, 11))  # process_group
    options: dict[str, Any] = {"preexec_fn": _group_child_setup if group else _child_setup}
    if vfork and argv and programs.starts_surely(argv[0], env, cwd):
        options = {"process_group": 0} if group else {}
        argv = [str(trampoline), "--pdeathsig", "KILL", "--", *argv]
        held = _SIGNALS & signal.pthread_sigmask(signal.SIG_BLOCK, ())  # the child's mask
    elif os.name != "posix":  # pragma: no cover - no preexec_fn there
        options = {}
    if held:  # blocked by whoever runs this thread: not in the child
        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            env=None if env is None else dict(env),
            cwd=cwd,
            bufsize=0 if group else -1,
            **options,
        )
    finally:
        if held:
            signal.pthread_sigmask(signal.SIG_BLOCK, held)
    proc.args = list(args)  # the caller's, not the trampoline's
    return proc


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
        with _signals_caught():
            proc = _popen(
                args,
                group=False,
                stdout=subprocess.PIPE if capture else None,
                stderr=(subprocess.STDOUT if merge_stderr else subprocess.PIPE)
                if capture
                else None,
                env=env,
                cwd=cwd,
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
        with _woken_by_signals() as woken:
            _read_pipes(pipes, kept, args, ends, timeout, cap, woken)
    finally:  # a child stopped early gets EPIPE; none of its pipes is left open
        for _name, pipe in pipes.values():
            pipe.close()
    left = None if ends is None else max(0.0, ends - time.monotonic())
    proc.wait(timeout=left)
    return bytes(kept["stdout"]), bytes(kept["stderr"])


def _read_pipes(
    pipes: dict[int, tuple[str, Any]],
    kept: dict[str, bytearray],
    args: Sequence[str],
    ends: float | None,
    timeout: float | None,
    cap: int,
    woken: int | None,
) -> None:
    """Read until every pipe is closed (each closed pipe leaves ``pipes``); a signal makes
    ``woken`` readable (io.interrupts.woken_by_signals), so its handler runs at once."""
    watched = [] if woken is None else [woken]
    while pipes:
        left = None if ends is None else ends - time.monotonic()
        if left is not None and left <= 0:
            raise subprocess.TimeoutExpired(list(args), timeout or 0)
        ready, _w, _x = select.select([*pipes, *watched], [], [], left)
        for fd in ready:
            if fd == woken:
                _drain_wakeups(fd)
                continue
            name, pipe = pipes[fd]
            data = os.read(fd, READ_SIZE)
            if not data:
                pipe.close()
                del pipes[fd]
                continue
            kept[name] += data
            if len(kept[name]) > cap:
                raise OutputTooLarge(str(args[0]), name, cap)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    for pipe in (proc.stdout, proc.stderr):  # an interrupt before _collect left them open
        if pipe is not None:
            pipe.close()
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _group_child_setup() -> None:  # pragma: no cover - runs in the child, before exec
    os.setpgid(0, 0)  # a group of its own: envkit signals all of it, and Ctrl-C reaches only us
    _child_setup()


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
    child: Streaming | None = None
    reaping = False
    try:
        with _signals_caught():  # no interrupt between the subreaper, the spawn and the object
            subreaper(True)
            reaping = True
            child = Streaming(
                _popen(args, group=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       env=env, cwd=cwd)
            )  # fmt: skip
    except BaseException:  # an interrupt caught during the spawn arrives here
        if child is not None:
            try:
                child.stop(1.0)
            finally:
                child.close()
        elif reaping:
            subreaper(False)
        raise
    return child
