"""Interrupts: Ctrl-C and SIGTERM are never lost (``io.process`` re-exports these names).

Python raises KeyboardInterrupt wherever the main thread is; raised inside ``fork``'s hooks it
is printed as a traceback and swallowed, and a build would go on. So the handler also records
the request for :func:`checkpoint`, :func:`signals_deferred` runs a block as one step (a signal
inside it is raised at its end), and :func:`signals_caught` keeps one from interrupting the
spawn of a child (without blocking it: a child started by vfork keeps the spawning thread's
signal mask). :func:`woken_by_signals` gives a wait on file descriptors one more to wait on,
which a signal makes readable: Python runs a signal's handler between bytecodes, so one landing
just before a ``select`` blocks, or taken by another thread, would otherwise wait for the
select to end.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # made only where a pool runs (concurrent.futures imports logging)
    from concurrent.futures import ThreadPoolExecutor

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
    """Handle SIGINT and SIGTERM; returns a function that restores the previous handlers
    and forgets the interrupts recorded meanwhile (a later run in the same process, as the
    tests make, must not be stopped by this run's Ctrl-C).

    While they are installed, a KeyboardInterrupt that Python cannot raise (the handler ran
    inside a weakref callback, a ``__del__`` or a collection: "Exception ignored in", with a
    traceback) is recorded for :func:`checkpoint` and never printed."""
    _requested.clear()
    saved = {sig: signal.signal(sig, _handler) for sig in SIGNALS}
    hook = sys.unraisablehook

    def unraisable(what: Any) -> None:
        if isinstance(what.exc_value, KeyboardInterrupt):
            _requested.set()  # honoured at the next checkpoint, or the result stands
            return
        hook(what)

    sys.unraisablehook = unraisable

    def restore() -> None:  # and what they recorded is theirs: no later checkpoint raises it
        sys.unraisablehook = hook
        for sig, previous in saved.items():
            signal.signal(sig, previous)
        _requested.clear()

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
def signals_caught() -> Iterator[None]:
    """SIGINT and SIGTERM recorded over the block (a child being spawned) and delivered to
    their own handlers after it, so no exception comes out of the middle of a spawn (a child
    started and no object left to stop it by). Nothing is blocked: a child started by vfork
    begins with the spawning thread's signal mask, and must have these unblocked.

    Python runs signal handlers in the main thread only; in another thread nothing can be
    raised and the block just runs. An ignored signal stays ignored (a child inherits that),
    and one handled outside Python is left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []

    def note(signum: int, _frame: FrameType | None) -> None:
        arrived.append(signum)

    saved: dict[signal.Signals, Any] = {}
    try:
        for sig in SIGNALS:  # a signal pending here reaches its own handler, which may raise
            now = signal.getsignal(sig)
            if now is not None and now != signal.SIG_IGN:
                saved[sig] = now
                signal.signal(sig, note)
        yield
    finally:
        try:
            _restore(saved)
        finally:
            if arrived:  # the last one, as envkit's handler passes on the last
                signal.raise_signal(arrived[-1])


def _restore(saved: dict[signal.Signals, Any]) -> None:
    """Every handler put back, even when one put back first raises for a signal still pending
    (``signal.signal`` runs pending handlers first); that exception is raised after."""
    raised: BaseException | None = None
    for sig, previous in saved.items():
        while True:
            try:
                signal.signal(sig, previous)
                break
            except BaseException as exc:  # a handler's: raised once all are back
                raised = exc
    if raised is not None:
        raise raised


_wakeup: tuple[int, int] | None = None  # the pipe signal.set_wakeup_fd writes into, made once


def _own_pipe_after_fork() -> None:  # pragma: no cover - runs in a forked child
    """A forked child (the tests' zygote forks envkit) makes its own pipe: one shared with
    the parent would let each read the other's wakeups."""
    global _wakeup
    if _wakeup is not None:
        for fd in _wakeup:
            os.close(fd)
        _wakeup = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_own_pipe_after_fork)


@contextmanager
def woken_by_signals() -> Iterator[int | None]:
    """Over the block, a file descriptor that becomes readable when a signal arrives (the
    read end of a pipe given to ``signal.set_wakeup_fd``, whose C handler writes a byte
    whichever thread takes the signal): a ``select`` waiting on it beside its own returns,
    and the handler runs at the next bytecode. Without it, a Ctrl-C arriving between the
    last bytecode and the select, or taken by another thread, waits until the select ends
    (a whole ``uv sync``). Pass what becomes readable to :func:`drain_wakeups`.

    None outside the main thread (only it runs handlers, only it may set the descriptor)
    and while another wakeup descriptor is set (an event loop's): that one is left alone."""
    global _wakeup
    if threading.current_thread() is not threading.main_thread() or os.name != "posix":
        yield None
        return
    if _wakeup is None:
        read, write = os.pipe()
        for fd in (read, write):
            os.set_blocking(fd, False)
            os.set_inheritable(fd, False)
        _wakeup = (read, write)
    ours = _wakeup[1]
    try:  # set inside the try: an interrupt the moment it is set still unsets it
        previous = signal.set_wakeup_fd(ours, warn_on_full_buffer=False)
        if previous not in (-1, ours):  # someone else's: theirs again, and none of ours
            signal.set_wakeup_fd(previous)
            yield None
            return
        drain_wakeups(_wakeup[0])  # bytes of signals already handled are not news
        yield _wakeup[0]
    finally:
        now = signal.set_wakeup_fd(-1)
        if now not in (-1, ours):  # someone else's, put back above: left as it was
            signal.set_wakeup_fd(now)


def drain_wakeups(fd: int) -> None:
    """Read what signals wrote into :func:`woken_by_signals`'s descriptor (it never blocks)."""
    while True:
        try:
            if not os.read(fd, 512):
                return
        except (BlockingIOError, InterruptedError):
            return


def to_main_thread() -> None:
    """SIGINT and SIGTERM blocked in the calling thread, so the kernel gives them to the main
    thread, the only one that runs their handlers: run first in every thread envkit starts
    (:func:`thread`, :func:`thread_pool`). While the main thread spawns a child by vfork
    (CPython blocks every signal in it meanwhile), a Ctrl-C then waits for it instead of
    landing in a worker, whose handler wakes no wait of the main thread's. A child started
    from such a thread still starts with both unblocked (``io.process``)."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)


def thread(target: Callable[[], object], name: str) -> threading.Thread:
    """A daemon thread (not started) that leaves the interrupts to the main thread."""

    def run() -> None:
        to_main_thread()
        target()

    return threading.Thread(target=run, name=name, daemon=True)


def thread_pool(
    workers: int, *, initializer: Callable[[], None] | None = None, name: str = ""
) -> ThreadPoolExecutor:
    """A thread pool whose workers leave the interrupts to the main thread (then run
    ``initializer``)."""

    def start() -> None:
        to_main_thread()
        if initializer is not None:
            initializer()

    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(max_workers=workers, initializer=start, thread_name_prefix=name)


T = TypeVar("T")


def within_deadline(work: Callable[[], T], seconds: float, late: Callable[[], Exception]) -> T:
    """``work()``, or the error ``late()`` makes once ``seconds`` (and one more) have passed.

    The work runs in a daemon thread, so the deadline holds even while a client waits on a
    server that drips its headers a byte at a time; the thread ends by itself soon after
    (every read in it has a timeout too). Ctrl-C still interrupts the wait.
    """
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["ok"] = work()
        except BaseException as exc:  # handed to the waiting thread
            box["error"] = exc

    worker = thread(run, "envkit-deadline")
    worker.start()
    worker.join(seconds + 1.0)
    if worker.is_alive():
        raise late()
    if "error" in box:
        raise box["error"]
    result: T = box["ok"]
    return result
