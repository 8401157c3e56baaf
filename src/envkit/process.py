"""Child processes and interrupts: every subprocess envkit starts goes through :func:`run`.

Two things make this more than ``subprocess.run``:

- Ctrl-C and SIGTERM are never lost. Python raises KeyboardInterrupt wherever the main
  thread is; raised inside ``fork``'s hooks it is printed as a traceback and swallowed, and a
  build would go on. So signals are held while a child is spawned, and the handler also
  records the request for :func:`checkpoint`.
- A child dies with envkit (Linux parent-death signal): a killed build never leaves uv
  writing into a folder that recovery is about to remove.
"""

from __future__ import annotations

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

_requested = threading.Event()
_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def _handler(_signum: int, _frame: FrameType | None) -> None:
    _requested.set()
    raise KeyboardInterrupt


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


def _child_setup() -> None:  # pragma: no cover - runs in the child, before exec
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)  # inherited from _signals_held
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


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
