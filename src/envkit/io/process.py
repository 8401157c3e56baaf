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
import functools
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

from envkit.errors import BadInput

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
# the named steps (README: "Fault injection for tests"); a name not here is a typo
FAULT_STEPS = frozenset(
    {
        "venv-created",
        "installed",
        "verified",
        "swap-journaled",
        "swap-old-moved",
        "swap-new-moved",
        "swap-committed",
        "old-removed",
        "atomic-written",
        "file-lock",
        "index-read",
        "manifest-read",
    }
)
_reached: dict[str, int] = {}
_reached_lock = threading.Lock()


@dataclass(frozen=True)
class Fault:
    """One ``step[#N]=SIGNAL`` of ``ENVKIT_FAULT``: at the ``nth`` time (0: every time)."""

    step: str
    nth: int
    signal: signal.Signals


def parse_faults(text: str) -> tuple[Fault, ...]:
    """``ENVKIT_FAULT`` read where it enters: ``step[#N]=SIGNAL[,...]``, SIGNAL a signal's
    name with or without ``SIG`` (``SIGTERM``, ``TERM``, ``kill``) or its number (``15``).
    BadInput (exit 2) naming what is wrong, for anything else."""
    faults = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        try:
            faults.append(_fault(item))
        except ValueError as exc:
            raise BadInput(
                f"{FAULT_VARIABLE}={text[:200]!r}: {exc}.",
                f"Write it as step[#N]=SIGNAL, e.g. {FAULT_VARIABLE}=swap-old-moved=TERM, or "
                "unset it (it is for tests).",
            ) from None
    return tuple(faults)


def _fault(item: str) -> Fault:
    """One ``step[#N]=SIGNAL``; ValueError saying what is wrong with it."""
    where, _eq, sig = item.partition("=")
    step, hashed, nth = (part.strip() for part in where.partition("#"))
    if step not in FAULT_STEPS:
        raise ValueError(
            f"{step!r} is not a step envkit stops at ({', '.join(sorted(FAULT_STEPS))})"
        )
    if hashed and not (nth.isascii() and nth.isdigit() and 0 < int(nth) < 10**6):
        raise ValueError(f"{nth!r} after '#' is not a count from 1")
    chosen = _signal(sig)
    if chosen is None:
        raise ValueError(
            f"{sig.strip()!r} is not a signal (give a name such as TERM or SIGKILL, or a number)"
        )
    return Fault(step, int(nth) if hashed else 0, chosen)


def _signal(text: str) -> signal.Signals | None:
    """A signal by name (with or without SIG, any case) or number; None for anything else.
    An empty SIGNAL means SIGINT (Ctrl-C)."""
    name = text.strip().upper()
    if not name:
        return signal.SIGINT
    if name.isascii() and name.isdigit():
        try:
            return signal.Signals(int(name)) if len(name) < 4 else None
        except ValueError:
            return None
    name = name if name.startswith("SIG") else f"SIG{name}"
    return signal.Signals.__members__.get(name)


@functools.lru_cache(maxsize=4)
def _faults(text: str) -> tuple[Fault, ...]:
    return parse_faults(text)


def check_faults() -> None:
    """Refuse a malformed ``ENVKIT_FAULT`` before a command starts (BadInput)."""
    text = os.environ.get(FAULT_VARIABLE)
    if text:
        _faults(text)


def fault_point(step: str) -> None:
    """For tests: ``ENVKIT_FAULT=step[#N]=SIGNAL[,...]`` (e.g. ``swap-old-moved=KILL``,
    ``atomic-written#3=SIGKILL``, ``verified=15``) sends that signal to envkit itself when
    it reaches the named step (the Nth time). Costs one dictionary look-up when the
    variable is unset."""
    wanted = os.environ.get(FAULT_VARIABLE)
    if not wanted:
        return
    with _reached_lock:
        _reached[step] = count = _reached.get(step, 0) + 1
    for fault in _faults(wanted):
        if fault.step == step and fault.nth in (0, count):
            os.kill(os.getpid(), fault.signal)


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
