"""A child's output in bounded pieces, and its lines as a terminal shows them (progress
bars drawing over themselves with carriage returns)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.io.pieces import Pieces, Screen


def terminal(text: str) -> list[str]:
    """What a terminal shows, one character at a time: the reference."""
    lines: list[str] = []
    line: list[str] = []
    col = 0
    for char in text:
        if char == "\n":
            lines.append("".join(line))
            line, col = [], 0
        elif char == "\r":
            col = 0
        else:
            if col < len(line):
                line[col] = char
            else:
                line.append(char)
            col += 1
    if line:
        lines.append("".join(line))
    return lines


def shown(chunks: list[bytes], limit: int = 64 * 1024) -> tuple[list[str], list[str], Pieces]:
    """(the finished lines, the live states drawn, the Pieces) for output in ``chunks``."""
    pieces, screen = Pieces(limit), Screen(limit)
    done: list[str] = []
    live: list[str] = []
    for piece in [p for c in chunks for p in pieces.feed(c)] + pieces.flush():
        line, now = screen.feed(piece.decode("latin-1"))
        if line is not None:
            done.append(line)
        if now is not None:
            live.append(now)
        assert len(pieces._carry) <= limit
    if (last := screen.flush()) is not None:
        done.append(last)
    return [d.removesuffix("\n") for d in done], live, pieces


def test_a_progress_bar_shows_its_latest_state() -> None:
    bar = b"".join(b"\rLoading: %3d%% | %d/4" % (n * 25, n) for n in range(5)) + b"\n"
    done, live, _ = shown([b"INFO start\n", bar, b"INFO next\n"])
    assert done == ["INFO start", "Loading: 100% | 4/4", "INFO next"]
    one_by_one, live, _ = shown([bytes([b]) for b in bar])
    assert one_by_one == ["Loading: 100% | 4/4"]
    assert live[0] == "" and live[-1] == "Loading:  75% | 3/4"  # at each carriage return
    # the newest update, before the next carriage return comes: the tail drawn on the line
    pieces, screen = Pieces(), Screen()
    for piece in pieces.feed(b"\rLoading:   0% | 0/4\rLoading:  25% | 1/4"):
        screen.feed(piece.decode())
    assert screen.preview(pieces.tail().decode()) == "Loading:  25% | 1/4"
    assert Screen().preview("a line that is no bar, unfinished") is None
    # a shorter update leaves the longer one's tail, as a terminal does; \r\n ends a line
    assert shown([b"abcdef\rXY\r\n", b"tail\r"])[0] == ["XYcdef", "tail"]


def test_pieces_keep_the_bytes_and_are_bounded() -> None:
    pieces = Pieces(limit=8)
    assert pieces.feed(b"ab\r") == [b"ab\r"]
    assert pieces.feed(b"cd\r\nef") == [b"cd\r\n"]
    assert pieces.feed(b"ghijklmnop") == [b"efghijkl\n"]  # cut at the limit
    assert pieces.feed(b"qrs\nok\n") == [b"ok\n"]  # the rest of the long line is dropped
    assert pieces.cut == 1 and pieces.flush() == []
    assert pieces.feed(b"tail") == [] and pieces.flush() == [b"tail\n"]
    assert pieces.feed(b"a\rb\rc") == [b"a\rb\r"]  # updates so far, in one piece


def test_a_megabyte_of_carriage_returns_stays_within_the_cap() -> None:
    limit = 1024
    pieces, screen = Pieces(limit), Screen(limit)
    for chunk in [b"\r" * 65536, b"x\r" * 32768, b"y" * 65536] * 6:
        for piece in pieces.feed(chunk):
            assert len(piece) <= limit + 1
            screen.feed(piece.decode())
            assert len(screen._line) <= limit and len(pieces._carry) <= limit
    assert pieces.cut == 6  # each run of y's longer than the cap, once


@given(st.lists(st.binary(max_size=40), max_size=30), st.integers(4, 32))
@settings(max_examples=examples(200), deadline=None)
def test_pieces_of_any_output_in_any_chunks(chunks: list[bytes], limit: int) -> None:
    pieces = Pieces(limit)
    out = [p for c in chunks for p in pieces.feed(c)] + pieces.flush()
    assert all(len(p) <= limit + 1 and p.endswith((b"\n", b"\r")) for p in out)
    whole = b"".join(chunks)
    if pieces.cut == 0:  # nothing was cut: every byte arrives, in order
        assert b"".join(out) == (
            whole if whole.endswith((b"\n", b"\r")) or not whole else whole + b"\n"
        )


# five characters against a model terminal: a small space, 150 examples a run
# (ENVKIT_HYPOTHESIS=thorough tries ten times as many)
@given(st.lists(st.text("ab \r\n", max_size=30), max_size=20))
@settings(max_examples=examples(150), deadline=None)
def test_the_screen_shows_what_a_terminal_shows(chunks: list[str]) -> None:
    done, _live, pieces = shown([c.encode() for c in chunks])
    assert pieces.cut == 0
    assert done == terminal("".join(chunks))
