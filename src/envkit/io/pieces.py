"""A child's output cut into bounded pieces as it arrives (``io.streaming.Streaming`` reads it;
``envkit serve`` tees vLLM's log through it), and its lines as a terminal shows them.

:class:`Pieces` keeps the bytes (the log file keeps them so): each piece ends at a newline,
or at the last carriage return of what has come of a line so far (a progress bar drawing
over itself), none longer than the cap. :class:`Screen` turns pieces into what a terminal
would show: a carriage return moves back to the line's start and what follows overwrites
it, so a bar's updates become the bar's latest state, and a finished line is the line as
it was last drawn. Both keep at most one line's cap of text, whatever the child writes (a
megabyte of carriage returns, a line that never ends).
"""

from __future__ import annotations

import re

LIMIT = 64 * 1024
_END = re.compile(rb"[\r\n]")
_RUNS = re.compile(r"\r\r+")  # several carriage returns in a row move no further than one


class Pieces:
    """A child's output cut into pieces that each end at a newline (the whole line, its
    carriage returns inside) or at the last carriage return of an unfinished line, none
    longer than ``limit`` bytes: a run of text without either that is longer is cut there
    (``cut`` counts them, the piece ends with a newline) and the rest of it dropped up to
    the next carriage return or newline, as it arrives."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self.cut = 0
        self._carry = b""
        self._skipping = False

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._carry + data if self._carry else data
        out: list[bytes] = []
        pos, size = 0, len(buf)
        while pos < size:
            if self._skipping:
                found = _END.search(buf, pos)
                if found is None:
                    pos = size
                    break
                self._skipping, pos = False, found.end()
                continue
            window = min(size, pos + self.limit)
            newline = buf.find(b"\n", pos, window)
            if newline >= 0:  # a whole line within the cap
                out.append(buf[pos : newline + 1])
                pos = newline + 1
                continue
            back = buf.rfind(b"\r", pos, window)
            if window == size and size - pos < self.limit:  # an unfinished line: keep its tail
                if back >= 0:
                    out.append(buf[pos : back + 1])
                    pos = back + 1
                break
            if back >= 0:  # a long line of updates: up to its last carriage return in the cap
                out.append(buf[pos : back + 1])
                pos = back + 1
                continue
            out.append(buf[pos:window] + b"\n")  # no line end within the cap: cut
            self.cut += 1
            self._skipping, pos = True, window
        self._carry = b"" if self._skipping else buf[pos:]
        return out

    def tail(self) -> bytes:
        """What has come of the current line after its last carriage return and is not in
        a piece yet (at most ``limit`` bytes): a progress bar's newest update."""
        return b"" if self._skipping else self._carry

    def flush(self) -> list[bytes]:
        """What is left when the output ends without a final newline."""
        rest, self._carry = self._carry, b""
        return [rest + b"\n"] if rest and not self._skipping else []


class Screen:
    """The line a terminal shows as pieces (text ending at ``\\n`` or ``\\r``) are written
    on it: a carriage return goes back to the line's start, and what follows overwrites
    it, character by character. Holds at most ``limit`` characters."""

    def __init__(self, limit: int = LIMIT) -> None:
        self.limit = limit
        self._line = ""
        self._column = 0
        self._drawn = False  # the line holds a carriage return: a bar drawing over itself

    def feed(self, piece: str) -> tuple[str | None, str | None]:
        """(the finished line with its newline, or None; the unfinished line as it now
        shows when the piece drew over it, or None)."""
        done = piece.endswith("\n")
        body = piece[:-1] if done else piece
        back = body.find("\r")
        first = body if back < 0 else body[:back]
        line, col = self._line, self._column
        if first:
            line = line[:col] + first + line[col + len(first) :]
            col += len(first)
        if back >= 0:
            line, col = _overwritten(_RUNS.sub("\r", body[back:]), line)
            self._drawn = True
        line = line[: self.limit]
        if done:
            self._line, self._column, self._drawn = "", 0, False
            return line + "\n", None
        self._line, self._column = line, min(col, self.limit)
        return None, line if back >= 0 else None

    def preview(self, tail: str) -> str | None:
        """The line as it shows once ``tail`` (no carriage return or newline: what
        :meth:`Pieces.tail` holds) is drawn on it, or None when the line is no bar (nothing
        is drawn over before its line is whole)."""
        if not self._drawn or not tail:
            return None
        col = self._column
        return (self._line[:col] + tail + self._line[col + len(tail) :])[: self.limit]

    def flush(self) -> str | None:
        """The unfinished line, finished (its last state), when anything was drawn."""
        if not self._line:
            return None
        line, _live = self.feed("\n")
        return line


def _overwritten(drawn: str, line: str) -> tuple[str, int]:
    """``line`` after ``drawn`` (which starts with a carriage return) is written over it,
    and the column the cursor is left at. Each part after a carriage return starts at
    column 0, so a column shows the last part that reaches it: read from the end, the parts
    before stop mattering once the longest has been met."""
    parts = drawn.split("\r")[1:]
    longest = max(map(len, parts))
    covered, shown = 0, []
    for part in reversed(parts):
        if len(part) > covered:
            shown.append(part[covered:])
            covered = len(part)
            if covered == longest:
                break
    return "".join(shown) + line[covered:], len(parts[-1])
