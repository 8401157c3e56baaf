"""Interrupts: Ctrl-C and SIGTERM are never lost (``io.process`` re-exports these names).

Python raises KeyboardInterrupt wherever the main thread is; raised inside ``fork``'s hooks it
is printed as a traceback and swallowed, and a build would go on. So the handler also records
the request for :func:`checkpoint`, :func:`signals_deferred` runs a block as one step (a signal
inside it is raised at its end), and :func:`signals_held` blocks the signals while a child is
spawned.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

_requested = threading.Event()
SIGNALS = {signal.SIGINT, signal.SIGTERM}
_deferring = 0  # > 0 inside signals_deferred(): a signal is recorded, raised at its end
_last_signal = signal.SIGINT


def _handler(signum: int, _frame: FrameType | None) -> None:
    global _last_signal
    _last_signal = signal.Signals(signum)
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


def install_signal_handlers() -> Callable[[], None]:
    """Handle SIGINT and SIGTERM; returns a function that restores the previous handlers."""
    _requested.clear()
    saved = {sig: signal.signal(sig, _handler) for sig in SIGNALS}

    def restore() -> None:
        for sig, previous in saved.items():
            signal.signal(sig, previous)

    return restore


def result_is_out() -> None:
    """The process's last run has written its result: nothing is left to interrupt, so a
    late Ctrl-C is ignored (never a traceback in the interpreter's shutdown, never a death
    by SIGINT after a complete answer) and SIGTERM ends the process as by default."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def last_signal() -> signal.Signals:
    """The interrupt that arrived last (SIGINT or SIGTERM): the one to pass on to a child."""
    return _last_signal


def checkpoint() -> None:
    """Raise KeyboardInterrupt if an interrupt arrived, even one that was swallowed."""
    if _requested.is_set():
        raise KeyboardInterrupt


@contextmanager
def signals_held() -> Iterator[None]:
    """The interrupts blocked for the block (a child being spawned), delivered after it."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - not POSIX
        yield
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
