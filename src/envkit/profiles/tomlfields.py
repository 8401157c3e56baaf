"""Values read out of a TOML document the declaration (``keys.check``) has checked: strings,
lists of strings, name = string tables, requirements, and the line a dotted key sits on, so
every problem can name its key path and line. A reader here takes what has the declared
type and skips the rest (``keys.check`` has said why); requirements are parsed here, and
their problems reported, never raised: the caller collects them all
(see ``profile.parse_profile``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement

from envkit.profiles.keys import Report

if TYPE_CHECKING:  # imported only where a text is parsed (tomldoc)
    import tomlkit.exceptions


def sub_table(doc: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = doc.get(key, {})
    return value if isinstance(value, dict) else {}


def text_value(doc: Mapping[str, Any], key: str) -> str:
    value = doc.get(key, "")
    return value.strip() if isinstance(value, str) else ""


def strings(doc: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """The non-empty strings of the array at ``key`` (none when it is not an array)."""
    values = doc.get(key, [])
    if not isinstance(values, list):
        return ()
    return tuple(v for v in values if isinstance(v, str) and v.strip())


def text_map(doc: Mapping[str, Any], key: str) -> dict[str, str]:
    """The name = string pairs of the table at ``key``."""
    return {str(k): v for k, v in sub_table(doc, key).items() if isinstance(v, str)}


def requirement_list(doc: Mapping[str, Any], key: str, problem: Report) -> tuple[str, ...]:
    out: list[str] = []
    for text in strings(doc, key):
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
