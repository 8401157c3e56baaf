"""How the core tells of long work without knowing who shows it (``render`` does).

A :class:`Progress` is called when a step begins; the step lasts until the next one begins
or the command prints its result. Plain ``Callable[[str], None]`` callbacks fit it too: the
keyword is for the few steps during which a child process (uv) draws its own progress on
the terminal, where nothing else may draw.
"""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def __call__(self, what: str, /, *, child_draws: bool = False) -> None:
        """A step begins: ``what`` it does, in a few words, with the numbers that matter."""


def quiet(what: str, /, *, child_draws: bool = False) -> None:
    """A :class:`Progress` that shows nothing (the default of every core function)."""
