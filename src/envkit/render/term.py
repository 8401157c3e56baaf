"""The terminal and the streams: the one place envkit writes to stdout and stderr.

Every line passes :func:`echo`: credentials in URLs never reach the output, and no character
of it can act on the terminal (ESC, other controls, bidi and zero-width characters are shown
as escapes such as ``\\x1b`` and ``\\u202e``, whatever they came from; only the newlines and
tabs envkit lays out stay, and colour is added after). Values that sit on one line (a model
type, a server's model id, an error paragraph) pass :func:`one_line`, which shows newlines as
escapes too. Text fits the terminal: paragraphs fold to its width, tables fold their last
column, paths are shortened from the left; ``--wide`` turns all of that off. Colour follows
NO_COLOR, then FORCE_COLOR, else the terminal. Also here: the JSON envelope, progress and
notes on stderr, errors, the interrupted line.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from envkit.errors import EXIT_CODES, EnvkitError
from envkit.io.escaping import visible
from envkit.io.redaction import redact

if TYPE_CHECKING:
    from envkit.findings import Finding

JSON_VERSION = 1


LAYOUT = "\n\t"  # the only characters that reach the streams unescaped
WIDE = False  # --wide: nothing is shortened or folded to the terminal's width


def set_wide(wide: bool) -> None:
    global WIDE
    WIDE = wide


def _colour() -> bool | None:
    """NO_COLOR (no-color.org) wins, then FORCE_COLOR; else colour only on a terminal."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return None


def echo(text: str = "", *, err: bool = False, nl: bool = True, **style: Any) -> None:
    """Every line envkit prints passes here: credentials in URLs never reach the output, and
    every character that is not printable, but the newlines and tabs of envkit's own layout,
    is shown as an escape before envkit's own colour is added."""
    # escaped first: a control character inside a URL's userinfo then no longer ends it early
    text = redact(visible(text, keep=LAYOUT))
    click.echo(click.style(text, **style) if style else text, err=err, nl=nl, color=_colour())


def one_line(text: str) -> str:
    """A value from outside, or a paragraph, on one line: newlines and tabs shown as escapes
    too, so that no value can start a line of its own (a fake verdict, a fake prompt)."""
    return visible(text)


def term_width() -> int:
    if WIDE:
        return 10_000
    return max(60, shutil.get_terminal_size((100, 24)).columns)


def cut(text: str, width: int) -> str:
    text = visible(text)
    if WIDE:
        return text
    return text if len(text) <= width else text[: max(1, width - 1)] + "…"


def wrap(text: str, first: str, rest: str) -> str:
    """A paragraph folded to the terminal's width (messages people must read in full); its
    own newlines and tabs become spaces, every other character that is not printable an
    escape (before folding, so that the widths are those shown)."""
    return textwrap.fill(
        visible(text, keep=LAYOUT),
        term_width(),
        initial_indent=first,
        subsequent_indent=rest,
        break_on_hyphens=False,
        break_long_words=False,
    )


def cut_left(text: str, width: int) -> str:
    """Shorten from the left: the end of a path is the part that tells."""
    text = visible(text)
    if WIDE:
        return text
    return text if len(text) <= width else "…" + text[len(text) - width + 1 :]


def table(rows: Sequence[Sequence[str]]) -> str:
    """Columns sized to their content; the last one folded onto more lines to fit the
    terminal (never cut: every word stays)."""
    if not rows:
        return ""
    rows = [[visible(cell) for cell in row] for row in rows]  # one line each, widths as shown
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    used = sum(w + 2 for w in widths[:-1])
    room = max(20, term_width() - used)
    out = []
    for row in rows:
        cells = [c.ljust(widths[i]) for i, c in enumerate(row[:-1])]
        lines = textwrap.wrap(row[-1], room, break_on_hyphens=False) or [""]
        out.append(("  ".join([*cells, lines[0]])).rstrip())
        out += [" " * used + line for line in lines[1:]]
    return "\n".join(out)


def columns(items: Sequence[str], indent: int = 2) -> str:
    """Names laid out in as many columns as the terminal holds."""
    if not items:
        return " " * indent + "(none)"
    items = [visible(i) for i in items]
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
    echo(json.dumps({"envkit": JSON_VERSION, **data}, indent=2, sort_keys=False))


def progress(message: str) -> None:
    """A step of long work, shown on a terminal only: piped output stays what was asked."""
    if sys.stderr.isatty():
        echo(f"envkit: {one_line(message)}", err=True, dim=True)


def note(message: str) -> None:
    """Something done or met on the way that the user must learn of (recovery, waiting),
    shown whether or not stderr is a terminal."""
    echo(f"envkit: {one_line(message)}", err=True, dim=True)


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
    echo(f"envkit: {one_line(text)}", err=True, fg="yellow")


def usage_error(message: str, as_json: bool) -> None:
    if as_json:
        emit_json({"ok": False, "exit_code": 2, "error": "UsageError", "message": message})
    echo("error: ", err=True, fg="red", bold=True, nl=False)
    echo(f"{one_line(message)} (envkit --help shows the commands and options)", err=True)


def exit_codes_help() -> str:
    return "\n".join(f"  {code:>3}  {text}" for code, text in EXIT_CODES.items())


def finding_lines(found: Sequence[Finding]) -> None:
    for problem in found:
        echo(wrap(f"{problem.code}: {problem.message}", "  ", "    "), fg="red")
        if problem.fix:
            echo(wrap(f"fix: {problem.fix}", "    ", "      "))
