"""Values read out of a TOML document where they enter: each key's shape against a schema,
strings, lists of names, requirements, time stamps, and the line a dotted key sits on, so
every problem can name its key path and line. Problems are reported, never raised: the
caller collects them all (see ``profile.parse_profile``)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

if TYPE_CHECKING:  # imported only where a text is parsed (tomldoc)
    import tomlkit.exceptions

Report = Callable[[str, str], None]  # (key path, message): one problem found
# table path -> key -> expected Python type of the value
Schemas = Mapping[str, Mapping[str, type | tuple[type, ...]]]


def is_timestamp(text: str) -> bool:
    """An RFC 3339 time stamp or a plain date, as uv's --exclude-newer takes them."""
    if not text.isascii() or not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}([Tt ].+)?", text):
        return False
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return False
    return True


def check_shape(table: Mapping[str, Any], schemas: Schemas, prefix: str, problem: Report) -> None:
    """Unknown keys (with the closest known one) and values of the wrong type, recursively."""
    schema = schemas[prefix]
    for key, value in table.items():
        path = f"{prefix}.{key}" if prefix else key
        if key not in schema:
            close = difflib.get_close_matches(key, list(schema), n=1, cutoff=0.6)
            hint = (
                f"; did you mean '{close[0]}'?" if close else f"; known keys: {', '.join(schema)}"
            )
            problem(path, f"unknown key '{key}'{hint}")
            continue
        expected = schema[key]
        if not isinstance(value, expected):
            want = expected.__name__ if isinstance(expected, type) else "value"
            kind = {"str": "a string", "list": "an array", "dict": "a table"}.get(want, want)
            problem(path, f"must be {kind}, not {type(value).__name__}")
        elif isinstance(value, dict) and path in schemas:
            check_shape(value, schemas, path, problem)


def sub_table(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = doc.get(key, {})
    return value if isinstance(value, dict) else {}


def text_value(doc: Mapping[str, Any], key: str) -> str:
    value = doc.get(key, "")
    return value.strip() if isinstance(value, str) else ""


def version_value(doc: Mapping[str, Any], path: str, problem: Report) -> str:
    """A version string (PEP 440, ASCII) at ``path``; '' when absent. Versions end up in
    image tags, URLs and commands, so anything else is a problem here."""
    text = text_value(doc, path.rpartition(".")[2])
    if text and not (text.isascii() and is_version(text)):
        problem(path, f"{text!r} is not a version such as '0.8.5'")
    return text


def name_list(
    doc: Mapping[str, Any],
    path: str,
    problem: Report,
    pattern: re.Pattern[str] | None = None,
    what: str = "",
) -> tuple[str, ...]:
    values = doc.get(path.rpartition(".")[2], [])
    if not isinstance(values, list):
        return ()
    out: list[str] = []
    for value in values:
        if not isinstance(value, str) or not value.strip():
            problem(path, f"entries must be non-empty strings, found {value!r}")
        elif pattern is not None and not pattern.fullmatch(value):
            problem(path, f"{value!r} is not {what}")
        else:
            out.append(value)
    return tuple(out)


def text_map(doc: Mapping[str, Any], path: str, problem: Report) -> dict[str, str]:
    table = sub_table(doc, path.rpartition(".")[2])
    for key, value in table.items():
        if not isinstance(value, str):
            problem(f"{path}.{key}", "must be a string")
    return {str(k): v for k, v in table.items() if isinstance(v, str)}


def requirement_list(doc: Mapping[str, Any], key: str, problem: Report) -> tuple[str, ...]:
    out: list[str] = []
    for text in name_list(doc, key, problem):
        if not text.isprintable():  # packaging lets a URL requirement hold ESC, U+202E...
            problem(key, f"{text!r} holds a character that is not printable")
            continue
        try:
            Requirement(text)
        except InvalidRequirement as exc:
            problem(key, f"{text!r} is not a valid requirement ({first_line(str(exc))})")
            continue
        out.append(text)
    return tuple(out)


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def parse_reason(exc: tomlkit.exceptions.ParseError) -> str:
    # tomlkit appends " at line L col C"; the line is reported separately.
    reason = re.sub(r"\s+at line \d+ col \d+$", "", str(exc))
    return reason.replace("'\\x00'", "end of file")


class KeyLines:
    """Finds the line of a dotted key in TOML text, for messages (best effort). The text is
    read at the first question: a valid profile asks none."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._read: dict[str, int] | None = None

    @property
    def _lines(self) -> dict[str, int]:
        if self._read is None:
            self._read = self._find_lines(self._text)
        return self._read

    @staticmethod
    def _find_lines(text: str) -> dict[str, int]:
        lines: dict[str, int] = {}
        table = ""
        for number, line in enumerate(text.splitlines(), start=1):
            stripped = line.strip()
            header = re.match(r"^\[\s*([^\[\]]+?)\s*\]", stripped)
            if header:
                table = header.group(1).replace('"', "").replace(" ", "")
                lines.setdefault(table, number)
                continue
            assign = re.match(r"^([A-Za-z0-9_\-\.\"' ]+?)\s*=", stripped)
            if assign:
                key = assign.group(1).replace('"', "").replace("'", "").replace(" ", "")
                full = f"{table}.{key}" if table else key
                lines.setdefault(full, number)
                # inline tables: record their keys too (versions = {a = "1"})
                for inner in re.findall(r"[{,]\s*([A-Za-z0-9_\-\"]+)\s*=", stripped):
                    lines.setdefault(f"{full}.{inner.strip(chr(34))}", number)
        return lines

    def find(self, key: str) -> int | None:
        while key:
            if key in self._lines:
                return self._lines[key]
            key = key.rpartition(".")[0]
        return None


def is_version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True
