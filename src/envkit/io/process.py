"""Child processes and interrupts: every subprocess envkit starts goes through :func:`run`.

Two things make this more than ``subprocess.run``:

- Ctrl-C and SIGTERM are never lost. Python raises KeyboardInterrupt wherever the main
  thread is; raised inside ``fork``'s hooks it is printed as a traceback and swallowed, and a
  build would go on. So signals are held while a child is spawned, and the handler also
  records the request for :func:`checkpoint`.
- A child dies with envkit (Linux parent-death signal): a killed build never leaves uv
  writing into a folder that recovery is about to remove.

Work that runs children from several threads at once (the lock matrix) gives its pool
:func:`one_cpu_per_worker`, so the children do not oversubscribe the cores.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

_requested = threading.Event()
_SIGNALS = {signal.SIGINT, signal.SIGTERM}
_deferring = 0  # > 0 inside signals_deferred(): a signal is recorded, raised at its end


def _handler(_signum: int, _frame: FrameType | None) -> None:
    _requested.set()
    if _deferring:
        return
    raise KeyboardInterrupt


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Run a block as one step: Ctrl-C or SIGTERM arriving inside it is raised at its end."""
    global _deferring
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
    if not _deferring:
        checkpoint()


FAULT_VARIABLE = "ENVKIT_FAULT"
_reached: dict[str, int] = {}
_reached_lock = threading.Lock()


def fault_point(step: str) -> None:
    """For tests: ``ENVKIT_FAULT=step[#N]=SIGNAL[,...]`` (e.g. ``swap-old-moved=KILL``,
    ``atomic-written#3=KILL``) sends that signal to envkit itself when it reaches the named
    step (the Nth time). Costs one dictionary look-up when the variable is unset."""
    wanted = os.environ.get(FAULT_VARIABLE)
    if not wanted:
        return
    with _reached_lock:
        _reached[step] = count = _reached.get(step, 0) + 1
    for item in wanted.split(","):
        name, _eq, sig = item.partition("=")
        name, _hash, nth = name.strip().partition("#")
        if name == step and (not nth or nth == str(count)):
            os.kill(os.getpid(), getattr(signal, f"SIG{sig.strip().upper() or 'INT'}"))


def install_signal_handlers() -> Callable[[], None]:
    """Handle SIGINT and SIGTERM; returns a function that restores the previous handlers."""
    _requested.clear()
    saved = {sig: signal.signal(sig, _handler) for sig in _SIGNALS}

    def restore() -> None:
        for sig, previous in saved.items():
            signal.signal(sig, previous)

    return restore


def checkpoint() -> None:
    """Raise KeyboardInterrupt if an interrupt arrived, even one that was swallowed."""
    if _requested.is_set():
        raise KeyboardInterrupt


@contextmanager
def _signals_held() -> Iterator[None]:
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - not POSIX
        yield
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)


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


def run(
    args: Sequence[str],
    *,
    capture: bool = True,
    merge_stderr: bool = False,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    cwd: Path | None = None,
) -> Completed:
    """Run a child to its end. Without ``capture`` it writes to our terminal.

    Raises OSError when the program cannot start, subprocess.TimeoutExpired after ``timeout``
    (the child is killed), and KeyboardInterrupt on Ctrl-C (the child is stopped first).
    """
    proc: subprocess.Popen[str] | None = None
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
                text=True,
                preexec_fn=_child_setup if os.name == "posix" else None,
            )
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        if proc is not None:
            _stop(proc)
        raise
    checkpoint()
    return Completed(tuple(args), proc.returncode, out or "", err or "")


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
