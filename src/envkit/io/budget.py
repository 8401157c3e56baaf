"""Time limits from the environment, and the time a client's requests have taken together.

A deadline bounds one exchange; a budget bounds all of one client's exchanges in a command,
counted as the time during which at least one of them is under way (parallel requests are
not counted twice, and the time spent between requests, resolving or parsing, not at all).
"""

from __future__ import annotations

import os
import threading
import time

from envkit.errors import BadInput


def seconds_setting(name: str, default: float, most: float) -> float:
    """A number of seconds from the environment variable ``name`` (``default`` when unset);
    BadInput unless a number above 0 and at most ``most``."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = float(text) if text.isascii() else float("nan")
    except ValueError:
        value = float("nan")
    if not 0 < value <= most:  # also refuses NaN
        raise BadInput(
            f"{name}={text!r} is not a number of seconds from above 0 to {most:.0f}.",
            f"Set {name} to a number of seconds such as 30, or unset it.",
        )
    return value


class Busy:
    """The time during which at least one request is under way (entered from any thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._since = 0.0
        self._spent = 0.0

    def __enter__(self) -> None:
        with self._lock:
            if self._running == 0:
                self._since = time.monotonic()
            self._running += 1

    def __exit__(self, *_exc: object) -> None:
        with self._lock:
            self._running -= 1
            if self._running == 0:
                self._spent += time.monotonic() - self._since

    def spent(self) -> float:
        with self._lock:
            running = time.monotonic() - self._since if self._running else 0.0
            return self._spent + running
