"""io.interrupts' wakeup descriptor: set only over its block, whatever interrupts it, and
never over someone else's."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any

import pytest

from envkit.io import interrupts

POSIX = pytest.mark.skipif(os.name != "posix", reason="signal.set_wakeup_fd on pipes: POSIX")


def _interrupted_once_set(real: Callable[..., int]) -> Callable[..., int]:
    """set_wakeup_fd that sets the descriptor, then is interrupted at once (a Ctrl-C landing
    as the call returns), the first time it is given envkit's."""
    fired: list[bool] = []

    def setting(fd: int, **options: Any) -> int:
        previous = real(fd, **options)
        if fd != -1 and not fired:
            fired.append(True)
            raise KeyboardInterrupt
        return previous

    return setting


@POSIX
def test_an_interrupt_as_the_descriptor_is_set_still_unsets_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = signal.set_wakeup_fd
    monkeypatch.setattr(signal, "set_wakeup_fd", _interrupted_once_set(real))
    with pytest.raises(KeyboardInterrupt), interrupts.woken_by_signals():
        pytest.fail("the block runs only once the descriptor is set")
    monkeypatch.undo()
    assert signal.set_wakeup_fd(-1) == -1  # not left set: the next wait would not be woken
    with interrupts.woken_by_signals() as woken:
        assert woken is not None  # and the next block has it


@POSIX
def test_a_signal_makes_the_descriptor_readable_and_drain_empties_it() -> None:
    import select

    saved = signal.signal(signal.SIGUSR1, lambda *_: None)
    try:
        with interrupts.woken_by_signals() as woken:
            assert woken is not None
            assert select.select([woken], [], [], 0)[0] == []
            signal.raise_signal(signal.SIGUSR1)
            assert select.select([woken], [], [], 0)[0] == [woken]
            interrupts.drain_wakeups(woken)
            assert select.select([woken], [], [], 0)[0] == []
        assert signal.set_wakeup_fd(-1) == -1
    finally:
        signal.signal(signal.SIGUSR1, saved)


@POSIX
def test_someone_elses_descriptor_is_left_alone() -> None:
    read, write = os.pipe()
    os.set_blocking(write, False)
    try:
        signal.set_wakeup_fd(write)
        with interrupts.woken_by_signals() as woken:
            assert woken is None  # an event loop's: envkit's waits go without
            assert signal.set_wakeup_fd(write) == write  # and it is still set
        assert signal.set_wakeup_fd(-1) == write
    finally:
        os.close(read)
        os.close(write)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork")
def test_a_forked_child_makes_a_pipe_of_its_own() -> None:
    """A pipe shared with the parent would let each drain the other's wakeups."""
    with interrupts.woken_by_signals() as parents:
        assert parents is not None
        pipe = os.fstat(parents).st_ino
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            with interrupts.woken_by_signals() as childs:
                os._exit(0 if childs is not None and os.fstat(childs).st_ino != pipe else 3)
        finally:
            os._exit(4)
    _pid, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    with interrupts.woken_by_signals() as again:
        assert again == parents and os.fstat(again).st_ino == pipe  # the parent's is its own


def test_outside_the_main_thread_there_is_none() -> None:
    import threading

    seen: list[object] = []

    def look() -> None:
        with interrupts.woken_by_signals() as woken:
            seen.append(woken)

    thread = threading.Thread(target=look)
    thread.start()
    thread.join()
    assert seen == [None]  # only the main thread runs handlers


def test_an_interrupt_python_cannot_raise_is_recorded_and_never_printed(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The handler run inside a weakref callback (importlib's module locks have one; a
    Ctrl-C there printed "Exception ignored in" and a traceback, then the run went on):
    nothing is printed, and the next checkpoint raises."""
    import weakref

    class Thing:
        pass

    def callback(_ref: object) -> None:
        interrupts._handler(signal.SIGINT, None)  # the handler, as a signal there runs it

    restore = interrupts.install_signal_handlers()
    try:
        thing = Thing()
        ref = weakref.ref(thing, callback)
        del thing  # the callback runs here; what it raises cannot reach this frame
        assert ref() is None
        with pytest.raises(KeyboardInterrupt):
            interrupts.checkpoint()
    finally:
        restore()
    assert capfd.readouterr().err == ""
    assert sys.unraisablehook is not None


_WHO_TAKES_IT = r"""
import os, signal, sys, time
from concurrent.futures import ThreadPoolExecutor
from envkit.io import interrupts

signal.signal(signal.SIGINT, lambda *_: None)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # whatever the test runner left
pool = interrupts.thread_pool(2) if sys.argv[1] == "envkit" else ThreadPoolExecutor(2)
list(pool.map(lambda _: None, range(4)))  # its workers started, now waiting for work
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # as while a child is vforked
os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C: to the process, any thread may take it


def pending():
    with open("/proc/self/status") as status:
        shared = next(int(line.split()[1], 16) for line in status if line.startswith("ShdPnd"))
    return bool(shared & (1 << (signal.SIGINT - 1)))


ends = time.monotonic() + 1.0  # a worker the kernel chose takes it once it is scheduled
while pending() and time.monotonic() < ends:
    time.sleep(0.01)
print("pending" if pending() else "taken by a worker")
pool.shutdown()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status")
@pytest.mark.parametrize(("pool", "said"), [("envkit", "pending"), ("plain", "taken by a worker")])
def test_a_ctrl_c_while_the_main_thread_blocks_it_waits_for_the_main_thread(
    pool: str, said: str
) -> None:
    """envkit's worker threads block SIGINT and SIGTERM (interrupts.to_main_thread): a
    Ctrl-C arriving while the main thread blocks every signal (CPython's vfork spawn) stays
    pending for it, where a plain pool's worker would take it and wake nothing of the main
    thread's. In a child process of its own: no test runner's thread can take it there."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", _WHO_TAKES_IT, pool], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout.strip()) == (0, said), done.stderr


def test_envkits_threads_block_the_interrupts() -> None:
    import threading

    masks: list[set[int | signal.Signals]] = []

    def look() -> None:
        masks.append(signal.pthread_sigmask(signal.SIG_BLOCK, ()))

    started = interrupts.thread(look, "test")
    started.start()
    started.join()
    with interrupts.thread_pool(1, initializer=look, name="test") as pool:
        pool.submit(look).result()
    assert len(masks) == 3 and all(mask >= interrupts.SIGNALS for mask in masks)
    assert not interrupts.SIGNALS & signal.pthread_sigmask(signal.SIG_BLOCK, ())  # not here
    assert threading.current_thread() is threading.main_thread()
