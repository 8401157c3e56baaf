"""The terminal and the streams: the one place envkit writes to stdout and stderr.

Every line passes :func:`echo`: secrets (URL credentials, keys, tokens) are masked in each
value before it is escaped (``io.redaction.redact``), and no character of it can act on the
terminal (ESC, other controls, bidi and zero-width characters are shown
as escapes such as ``\\x1b`` and ``\\u202e``, whatever they came from; only the newlines and
tabs envkit lays out stay, and colour is added after). Values that sit on one line (a model
type, a server's model id, an error paragraph) pass :func:`one_line`, which shows newlines as
escapes too. Text fits the terminal: paragraphs fold to its width, tables fold their last column;
on a terminal alone, a cell too long for its column is cut with ``…`` (paths from the left)
and the run ends with a hint that ``--wide`` shows it whole. Output to a pipe or a file is
never cut, only folded at word boundaries; ``--wide`` turns folding off too. Colour follows
NO_COLOR, then FORCE_COLOR, else the terminal. JSON is redacted as a structure, every string
value and key before ``json.dumps`` (:func:`emit_json`), and the encoded document is never
masked as text, so it always parses. Also here: the JSON envelope, progress (a
live line on a terminal, one line per step on a pipe) and notes on stderr, errors, the
interrupted line.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from envkit.errors import EXIT_CODES, EnvkitError
from envkit.io import interrupts
from envkit.io.escaping import visible
from envkit.io.redaction import redact, redact_data

if TYPE_CHECKING:
    from envkit.results import Result

JSON_VERSION = 1


LAYOUT = "\n\t"  # the only characters that reach the streams unescaped
WIDE = False  # --wide: nothing is shortened or folded to the terminal's width
SHORTENED = False  # something was cut to fit the terminal in this run (the hint says so)


def set_wide(wide: bool) -> None:
    global WIDE
    WIDE = wide


def start() -> None:
    """A run begins (main may run many times in one process): nothing wide, nothing cut
    yet, the progress clock at zero."""
    global SHORTENED
    set_wide(False)
    SHORTENED = False
    _steps.reset()


def finish() -> None:
    """A run ends: the live progress line is settled, and when something was cut to fit the
    terminal, one line on stderr says how to see it whole."""
    _steps.settle()
    _steps.stop()
    if SHORTENED and not WIDE:
        echo(
            "envkit: cells cut (…) to fit the terminal; add --wide to see them whole",
            err=True,
            dim=True,
        )


def on_terminal() -> bool:
    """Whether stdout is a terminal: only there may a cell be cut to fit."""
    return sys.stdout.isatty()


def shortening() -> bool:
    """Whether cells are cut to fit: on a terminal, without --wide."""
    return on_terminal() and not WIDE


def _colour() -> bool | None:
    """NO_COLOR (no-color.org) wins, then FORCE_COLOR; else colour only on a terminal."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return None


def echo(text: str = "", *, err: bool = False, nl: bool = True, **style: Any) -> None:
    """Every line envkit prints passes here: secrets are masked in the text (a value, not
    yet encoded), then every character that is not printable, but the newlines and tabs of
    envkit's own layout, is shown as an escape before envkit's own colour is added."""
    # masked before it is escaped: a URL's userinfo runs across controls (ESC, CR, U+2028),
    # so one inside it cannot end it early; only a space, tab or newline ends it
    _write(visible(redact(text), keep=LAYOUT), err=err, nl=nl, **style)


def echo_encoded(text: str, *, err: bool = False, nl: bool = True) -> None:
    """Text already encoded for its format (a JSON document, a YAML service) from values
    redacted before they were encoded: never masked as text, which could break it (a
    ``"api_key": ***``); still escaped, so nothing in it acts on the terminal."""
    _write(visible(text, keep=LAYOUT), err=err, nl=nl)


def _write(text: str, *, err: bool, nl: bool, **style: Any) -> None:
    _steps.settle()  # output ends the step on the live line (a note goes aside)
    if not style and text.isascii():
        # what click.echo writes for escaped ASCII text without colour, without loading
        # click (`envkit --version` needs nothing else)
        stream = sys.stderr if err else sys.stdout
        if stream is not None:
            stream.write(text + "\n" if nl else text)
            stream.flush()
        return
    import click  # here, not at the top: see above

    click.echo(click.style(text, **style) if style else text, err=err, nl=nl, color=_colour())


def live_line(text: str, *, err: bool = False) -> bool:
    """``text`` drawn over the line before it, on a terminal only (a child's progress bar
    as it updates: ``envkit serve``): a carriage return and an erase, then the text escaped,
    masked and cut to the width (a line that wrapped could not be drawn over); ``""`` wipes
    it. Returns whether it drew: on a pipe nothing is written (the line's last state comes
    through :func:`echo` once it is finished)."""
    if not (sys.stderr if err else sys.stdout).isatty():
        return False
    shown = redact(visible(text))
    room = shutil.get_terminal_size((100, 24)).columns - 1
    if len(shown) > room:
        shown = shown[: max(1, room - 1)] + "…"
    import click

    click.echo("\r\x1b[K" + shown, err=err, nl=False, color=_colour())
    return True


def one_line(text: str) -> str:
    """A value from outside, or a paragraph, on one line: newlines and tabs shown as escapes
    too, so that no value can start a line of its own (a fake verdict, a fake prompt). Its
    secrets are masked first, as it is one line (a URL's userinfo runs across newlines)."""
    return shown(text)


def shown(text: str, keep: str = "") -> str:
    """A value as the terminal shows it: secrets masked, then escaped (``visible``)."""
    return visible(redact(text, one_line=not keep), keep=keep)


def term_width() -> int:
    if WIDE:
        return 10_000
    return max(60, shutil.get_terminal_size((100, 24)).columns)


def _shortens(text: str, width: int) -> bool:
    """Whether ``text`` is cut to ``width``: only on a terminal, and never with --wide."""
    global SHORTENED
    if WIDE or len(text) <= width or not on_terminal():
        return False
    SHORTENED = True
    return True


def cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` with ``…`` on a terminal; whole anywhere else."""
    text = shown(text)
    return text[: max(1, width - 1)] + "…" if _shortens(text, width) else text


def wrap(text: str, first: str, rest: str) -> str:
    """A paragraph folded to the terminal's width (messages people must read in full); its
    own newlines and tabs become spaces, every other character that is not printable an
    escape (before folding, so that the widths are those shown)."""
    return textwrap.fill(
        shown(text, keep=LAYOUT),
        term_width(),
        initial_indent=first,
        subsequent_indent=rest,
        break_on_hyphens=False,
        break_long_words=False,
    )


def cut_left(text: str, width: int) -> str:
    """Shorten from the left on a terminal (the end of a path is the part that tells)."""
    text = shown(text)
    return "…" + text[len(text) - width + 1 :] if _shortens(text, width) else text


def fold(text: str, width: int) -> list[str]:
    """``text`` for a column ``width`` wide: cut on a terminal (whole with --wide), else
    folded at word boundaries (a word longer than the column stays whole)."""
    if WIDE or on_terminal():
        return [cut(text, width)]
    text = shown(text)
    return textwrap.wrap(text, max(width, 1), break_on_hyphens=False, break_long_words=False) or [
        ""
    ]


def table(rows: Sequence[Sequence[str]]) -> str:
    """Columns sized to their content; the last one folded onto more lines to fit the
    terminal (never cut: every word stays)."""
    if not rows:
        return ""
    rows = [[shown(cell) for cell in row] for row in rows]  # one line each, widths as shown
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    used = sum(w + 2 for w in widths[:-1])
    room = max(20, term_width() - used)
    out = []
    for row in rows:
        cells = [c.ljust(widths[i]) for i, c in enumerate(row[:-1])]
        lines = textwrap.wrap(row[-1], room, break_on_hyphens=False, break_long_words=False)
        lines = lines or [""]
        out.append(("  ".join([*cells, lines[0]])).rstrip())
        out += [" " * used + line for line in lines[1:]]
    return "\n".join(out)


def columns(items: Sequence[str], indent: int = 2) -> str:
    """Names laid out in as many columns as the terminal holds."""
    if not items:
        return " " * indent + "(none)"
    items = [shown(i) for i in items]
    width = max(len(i) for i in items) + 2
    per_line = max(1, (term_width() - indent) // width)
    lines = []
    for start in range(0, len(items), per_line):
        row = items[start : start + per_line]
        lines.append(" " * indent + "".join(i.ljust(width) for i in row).rstrip())
    return "\n".join(lines)


def human_size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return str(n)


def emit_json(data: dict[str, Any]) -> None:
    """The JSON envelope: every string of ``data`` (keys too) redacted as a value, secret-
    named keys' values masked (``redact_data``), then encoded; ASCII only (non-ASCII and
    control characters as ``\\u`` escapes), and never masked as text: it always parses."""
    encode_json({"envkit": JSON_VERSION, **data}, indent=2)


def encode_json(data: Any, **dumps: Any) -> None:
    """Any JSON value on stdout, redacted as a structure before ``json.dumps``."""
    echo_encoded(json.dumps(redact_data(data), ensure_ascii=True, **dumps))


def progress(message: str, /, *, child_draws: bool = False) -> None:
    """A step of long work begins (envkit.progress.Progress). On a terminal, a live line
    with the seconds the step has taken, redrawn each second until the next step or the
    output; on a pipe, one line per step with the seconds since the command began. With
    ``child_draws`` a child process (uv) draws its own progress: the line is written once."""
    _steps.begin(message, child_draws)


class _Steps:
    """The step shown on stderr: a live line on a terminal, redrawn by a daemon thread."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.started = time.monotonic()
        self.what = ""
        self.began = 0.0
        self.live = False  # a step is current and shown as a live line
        self.drawn = False  # the live line is on the terminal at this moment
        self.thread: threading.Thread | None = None
        self.stopping = threading.Event()

    def reset(self) -> None:
        with self.lock:
            self.started, self.what, self.live, self.drawn = time.monotonic(), "", False, False

    def _line(self) -> str:
        return f"envkit: [{self.began - self.started:5.1f} s] {self.what}"

    def begin(self, what: str, child_draws: bool) -> None:
        with self.lock:
            self.settle()
            self.what, self.began = one_line(what), time.monotonic()
            if child_draws or not sys.stderr.isatty():
                echo(self._line(), err=True, dim=True)
                return
            self.live = True
            self._draw()
            if self.thread is None or not self.thread.is_alive():
                self.stopping.clear()
                self.thread = interrupts.thread(self._tick, "envkit-progress")
                self.thread.start()

    def _draw(self) -> None:
        """The live line, fitted to the terminal (a line that wrapped could not be redrawn)."""
        head, tail = self._line(), f"  ({time.monotonic() - self.began:.0f} s)"  # one_line
        room = shutil.get_terminal_size((100, 24)).columns - 1 - len(tail)
        if len(head) > room:  # the seconds stay in sight; the step's line is whole later
            head = head[: max(1, room - 1)] + "…"
        line = "".join(c if c.isprintable() else "?" for c in head) + tail
        import click

        click.echo("\r\x1b[K" + click.style(line, dim=True), err=True, nl=False, color=_colour())
        self.drawn = True

    def _wipe(self) -> None:
        if self.drawn:
            import click

            click.echo("\r\x1b[K", err=True, nl=False)
            self.drawn = False

    def _tick(self) -> None:
        while not self.stopping.wait(1.0):
            with self.lock:
                if self.live:
                    self._draw()

    def aside(self, write: Callable[[], None]) -> None:
        """``write`` a note below the live line, which goes on (the next tick redraws it)."""
        with self.lock:
            live, self.live = self.live, False
            self._wipe()
            write()
            self.live = live

    def settle(self) -> None:
        """The live line becomes the step's static line (what it did, when it began)."""
        with self.lock:
            if self.live:
                self.live = False
                self._wipe()
                echo(self._line(), err=True, dim=True)

    def stop(self) -> None:
        self.stopping.set()


_steps = _Steps()


def note(message: str) -> None:
    """Something done or met on the way that the user must learn of (recovery, waiting),
    shown whether or not stderr is a terminal (below a live progress line, which goes on)."""
    _steps.aside(lambda: echo(f"envkit: {one_line(message)}", err=True, dim=True))


def error(exc: EnvkitError, as_json: bool) -> None:
    if as_json:
        emit_json({"ok": False, "exit_code": exc.exit_code, **exc.to_dict()})
    echo("error: ", err=True, fg="red", bold=True, nl=False)
    echo(one_line(str(exc)), err=True)  # one paragraph, whatever its values held


def broken_profiles(errors: Sequence[EnvkitError]) -> None:
    """Profiles that could not be read, named on stderr while a command goes on without them."""
    for err in errors:
        echo("skipped a broken profile: ", err=True, fg="yellow", nl=False)
        echo(one_line(err.message), err=True)


def interrupted(as_json: bool, state: str = "") -> None:
    """The last line of an interrupted run: what it says about the files must be true, so
    commands that change something hand over what they left (``state``)."""
    text = f"Interrupted. {state}" if state else "Interrupted."
    if as_json:
        emit_json({"ok": False, "exit_code": 130, "error": "Interrupted", "message": text})
    if sys.stderr.isatty():
        echo(err=True)  # off the line the terminal echoed ^C on
    echo(f"envkit: {one_line(text)}", err=True, fg="yellow")


def usage_error(message: str, usage: str = "", hint: str = "", *, as_json: bool) -> None:
    """The usage error on one line (what the user typed cannot start a line of its own),
    then click's usage line of the command and where its help is."""
    if as_json:
        whole = "\n".join(part for part in (message, usage, hint) if part)
        emit_json({"ok": False, "exit_code": 2, "error": "UsageError", "message": whole})
    echo("error: ", err=True, fg="red", bold=True, nl=False)
    echo(one_line(message), err=True)
    for line in (usage, hint):
        if line:
            echo(line, err=True)


def exit_codes_help() -> str:
    return "\n".join(f"  {code:>3}  {text}" for code, text in EXIT_CODES.items())


def finding_lines(found: Sequence[Result]) -> None:
    for problem in found:
        echo(wrap(f"{problem.code}: {problem.message}", "  ", "    "), fg="red")
        if problem.fix:
            echo(wrap(f"fix: {problem.fix}", "    ", "      "))
