"""A child's output cut into bounded lines as it arrives (``io.process.Streaming`` reads it;
``envkit serve`` tees vLLM's log through it)."""

from __future__ import annotations

import re


class Pieces:
    """A child's output cut into pieces that each end at a newline or a carriage return (a
    progress bar's update), none longer than ``limit`` bytes: a longer line is cut there
    (``cut`` counts them) and the rest of it dropped as it arrives, so memory stays bounded
    whatever the child writes."""

    def __init__(self, limit: int = 64 * 1024) -> None:
        self.limit = limit
        self.cut = 0
        self._carry = b""
        self._skipping = False

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._carry + data if self._carry else data
        out: list[bytes] = []
        start = 0
        for match in _ENDS.finditer(buf):
            end = match.end()
            if self._skipping:
                self._skipping = False
            else:
                out.append(self._bounded(buf[start:end]))
            start = end
        rest = buf[start:]
        if self._skipping:
            rest = b""
        elif len(rest) > self.limit:
            out.append(self._bounded(rest))
            self._skipping, rest = True, b""
        self._carry = rest
        return out

    def flush(self) -> list[bytes]:
        """What is left when the output ends without a final newline."""
        rest, self._carry = self._carry, b""
        return [rest + b"\n"] if rest and not self._skipping else []

    def _bounded(self, piece: bytes) -> bytes:
        if len(piece) <= self.limit:
            return piece
        self.cut += 1
        return piece[: self.limit] + b"\n"


_ENDS = re.compile(rb"\r\n?|\n")
