"""Typed reading of decoded JSON (what ``json.loads`` gave), one object at a time: every value
checked where it enters for its type, its range and its size, and the first wrong one
failing with its key path, what was wanted and what was there
(:func:`envkit.io.escaping.described`). One mechanism for the documents envkit reads back,
each failing in its own words (:meth:`JsonObject.fail`):

- a cache entry (:class:`envkit.io.cache.Fields`): BadEntry, and the entry is read anew;
- the probe's answer from inside a venv (:mod:`envkit.env.facts`): EnvironmentBroken;
- a node's fingerprint (:mod:`envkit.fleet.fingerprint`): ValueError naming the key path.

>>> from envkit.io.escaping import described
>>> class Doc(JsonObject):
...     def fail(self, path, wanted, value):
...         return ValueError(f"{path}: expected {wanted}, got {described(value)}")
>>> doc = Doc({"n": 3, "s": 7}, "doc")
>>> doc.whole_of(doc.data["n"], doc.at("n"), 10)
3
>>> doc.text_of(doc.data["s"], doc.at("s"))
Traceback (most recent call last):
ValueError: doc.s: expected a string of at most 65536 characters, got 7
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["JsonObject"]


class JsonObject:
    """One JSON object; each document's reader is a subclass that says how it fails
    (:meth:`fail`) and how much it takes (``max_text`` characters in a string, ``max_items``
    in a list or an object), and reads keys in its own words with the checks below."""

    max_text = 64 * 1024
    max_items = 200_000

    def __init__(self, data: object, path: str) -> None:
        if not isinstance(data, dict):
            raise self.fail(path, "an object", data)
        if len(data) > self.max_items:
            raise self.fail(path, f"an object of at most {self.max_items} keys", data)
        self.data: dict[str, Any] = data
        self.path = path

    def fail(self, path: str, wanted: str, value: object) -> Exception:
        """The exception for ``value`` at ``path``, which is not ``wanted``."""
        raise NotImplementedError

    def at(self, key: str) -> str:
        """The key path of ``key`` in this object."""
        return f"{self.path}.{key}"

    def text_of(self, value: object, path: str, *, empty: bool = True) -> str:
        if not isinstance(value, str) or len(value) > self.max_text or (not empty and not value):
            said = "a non-empty string" if not empty else "a string"
            raise self.fail(path, f"{said} of at most {self.max_text} characters", value)
        return value

    def whole_of(self, value: object, path: str, high: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
            raise self.fail(path, f"a whole number from 0 to {high}", value)
        return value

    def number_of(self, value: object, path: str, high: float | None = None) -> float:
        """A finite number (from 0 to ``high`` when it is given)."""
        ranged = high is None or (isinstance(value, int | float) and 0 <= value <= high)
        if isinstance(value, bool) or not isinstance(value, int | float) or not ranged:
            wanted = "a number" if high is None else f"a number from 0 to {high}"
            raise self.fail(path, wanted, value)
        if not math.isfinite(value):
            raise self.fail(path, "a finite number", value)
        return float(value)

    def flag_of(self, value: object, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, "true or false", value)
        return value

    def list_of(self, value: object, path: str, cap: int | None = None) -> list[Any]:
        most = self.max_items if cap is None else cap
        if not isinstance(value, list) or len(value) > most:
            raise self.fail(path, f"a list of at most {most} items", value)
        return value

    def object_of(self, value: object, path: str, cap: int | None = None) -> dict[str, Any]:
        most = self.max_items if cap is None else cap
        if not isinstance(value, dict) or len(value) > most:
            raise self.fail(path, f"an object of at most {most} keys", value)
        return value
