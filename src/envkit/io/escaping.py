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
- :func:`shell_command` quotes each word of a command envkit prints for a POSIX shell;
- :func:`described` names a value read from JSON in a message, in JSON's own spelling.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable

from envkit.wording import counted

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


# a key absent from a JSON object, as the readers that name wrong values pass it
MISSING = object()
SHOWN = 60  # characters of a string value a message shows


def described(value: object) -> str:
    """A value read from JSON as a message names it: ``null``, ``true``, ``5``, ``"text"``
    (cut to SHOWN characters, all but ASCII escaped), ``an object``, ``a list of 3 items``,
    or ``nothing (the key is missing)`` for :data:`MISSING`; never Python's spelling.

    >>> described(None), described(True), described("x" * 70)[-5:], described([1])
    ('null', 'true', 'xxx"…', 'a list of 1 item')
    """
    if value is MISSING:
        return "nothing (the key is missing)"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list of " + counted(len(value), "item")
    if isinstance(value, str) and len(value) > SHOWN:
        return json.dumps(value[:SHOWN])[:-1] + '"…'
    try:
        return json.dumps(value)
    except (TypeError, ValueError):  # not a JSON value: what a caller built itself
        return visible(repr(value))[:SHOWN]
