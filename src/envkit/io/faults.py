"""Fault injection for tests: ``ENVKIT_FAULT=step[#N]=SIGNAL[,...]`` makes envkit send itself
SIGNAL when it reaches a named step, so tests kill and interrupt at exact points instead of
after a delay. The variable is read where it enters (:func:`parse_faults`); a malformed one
is BadInput (exit 2) before any command runs (:func:`check_faults`, called by ``cli.main``).
"""

from __future__ import annotations

import functools
import os
import signal
import threading
from dataclasses import dataclass

from envkit.errors import BadInput

FAULT_VARIABLE = "ENVKIT_FAULT"
# the named steps (docs/development.md: "Fault injection for tests"); a name not here is a typo
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
        "startup",
        "command-import",
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
