"""Text from outside, encoded for where envkit puts it.

What envkit reads (model files, wheels, index pages, servers' answers, profiles, uv's
messages) may hold characters that act instead of showing: ESC starts a terminal control
sequence (a window title, a clipboard write through OSC 52), CR, form feed and the Unicode
line separators start a new line in a constraints file or a comment, U+202E reverses the
text after it. Three encodings, one rule of what is "not printable" (``str.isprintable``:
C0 and C1 controls, DEL, format characters such as bidi overrides and zero-width ones,
separators other than the space, surrogates, private use, unassigned code points):

- :func:`visible` shows each such character as an escape (``\\x1b``, ``\\u202e``), for the
  terminal (render.term) and for comment lines in generated files;
- :func:`unsafe_character` finds the first one (or any whitespace), for values that must be
  refused where they enter, such as URLs;
- :func:`shell_command` quotes each word of a command envkit prints for a POSIX shell.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

# everything but printable ASCII; each match is then decided by str.isprintable
_SUSPECT = re.compile(r"[^ -~]")
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def escape(char: str) -> str:
    """One character as Python writes it in a string literal: ``\\n``, ``\\x1b``,
    ``\\u202e``."""
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def visible(text: str, keep: str = "") -> str:
    """``text`` with every character that is not printable shown as its escape, except those
    in ``keep`` (the terminal keeps the newlines and tabs envkit itself lays out). The result
    holds only printable characters and ``keep``, so applying it twice changes nothing."""

    def one(found: re.Match[str]) -> str:
        char = found.group()
        return char if char in keep or char.isprintable() else escape(char)

    return _SUSPECT.sub(one, text)


def unsafe_character(text: str) -> str | None:
    """The first whitespace or not-printable character of ``text``, or None when it has none:
    a URL or a name holding one could start a new line or hide itself where it is written."""
    if text.isprintable() and " " not in text:
        return None
    return next(c for c in text if c.isspace() or not c.isprintable())


def shell_command(words: Iterable[str]) -> str:
    """A command line a POSIX shell splits back into exactly ``words`` (``shlex.quote``)."""
    return " ".join(shlex.quote(word) for word in words)
