"""A profile's TOML as plain data (tables, arrays, strings): parsed the first time envkit
meets a text, read back from envkit's cache (``io.cache``, kind ``profiles``, keyed by the
text's sha256) every time after.

A text not met before is read first by the standard library's ``tomllib`` (:func:`quick`,
several times faster than tomlkit, and no tomlkit import; Python 3.11 on, 3.10 has none);
only when it refuses the text, or the profile its document makes is not valid, is the text
parsed again by tomlkit
(:func:`strict`), whose document is validated as ever: so every problem and message is the
one tomlkit's reading gives, and a valid profile is the same Profile either way (the same
TOML read by two conforming parsers).

tomlkit takes 25-75 ms for each shipped profile, and importing it about as much again;
``check-model`` and ``which`` read every profile on the path. The cache turns that into a
JSON read of well under a millisecond. Only the document of a text that made a valid
profile is stored (``profile.parse_profile`` stores it after validating it), and a cached
document is validated again exactly like a fresh one, so every problem and message still
comes from tomlkit and the validation, and a profile edited by hand is parsed afresh.

An entry is input (``io.cache``): it is read only as plain data (tables, arrays, strings,
no deeper than a profile goes) whose every key and string is found in the text itself, so
an entry written by someone else cannot bring in a requirement or an index the file does
not name; anything else is discarded and the text parsed again. Tables are stored as lists
of pairs, in the file's order (the cache writes JSON objects with sorted keys).
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from typing import Any

from envkit.errors import Problem, ProfileError
from envkit.io.cache import PROFILES, BadEntry, Fields

MAX_DEPTH = 8  # a profile nests four tables deep (models.transformers_bounds.ARCH.min)


def cached(text: str, sha256: str = "") -> dict[str, Any] | None:
    """The document of ``text`` kept in envkit's cache; None when none is (or it is not
    what :func:`store` writes). ``sha256``: the text's hex digest, when the caller has it."""
    return PROFILES.load(sha256 or _key(text), lambda fields: _entry(fields, text))


def quick(text: str) -> dict[str, Any] | None:
    """The document of ``text`` as ``tomllib`` reads it; None when it refuses the text, on
    Python 3.10 (no ``tomllib``), or when the text holds a carriage return (tomllib reads a
    multi-line string's CRLF as LF, tomlkit keeps it: such a text is left to tomlkit, so the
    Profile is the same)."""
    if "\r" in text:
        return None
    if sys.version_info >= (3, 11):
        import tomllib

        try:
            return tomllib.loads(text)
        except (tomllib.TOMLDecodeError, ValueError, TypeError, RecursionError):
            return None
    return None  # Python 3.10 has no tomllib: tomlkit reads every text


def strict(text: str, shown: str) -> dict[str, Any]:
    """The document of ``text`` as tomlkit reads it. Raises ProfileError for TOML tomlkit
    refuses, with tomlkit's reason and line."""
    import tomlkit  # only for a text not met before
    import tomlkit.exceptions

    from envkit.profiles.tomlfields import parse_reason

    try:
        doc: dict[str, Any] = tomlkit.parse(text).unwrap()
    except tomlkit.exceptions.ParseError as exc:
        raise ProfileError(
            [Problem(shown, "", f"malformed TOML: {parse_reason(exc)}", exc.line)]
        ) from None
    except (tomlkit.exceptions.TOMLKitError, ValueError, RecursionError) as exc:
        raise ProfileError([Problem(shown, "", f"malformed TOML: {exc}")]) from None
    return doc


def store(text: str, doc: dict[str, Any], sha256: str = "") -> None:
    """Keep the document of a text that made a valid profile; nothing when it holds other
    than tables, arrays and strings or a string the text does not spell out (an escape)."""
    try:
        encoded = _encode(doc, 0)
        _check_spelled(doc, text)
    except BadEntry:
        return
    PROFILES.store(sha256 or _key(text), {"doc": encoded})


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _encode(value: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise BadEntry("too deep")
    if type(value) is str:
        return value
    if type(value) is list:
        return {"a": [_encode(v, depth + 1) for v in value]}
    if type(value) is dict and all(type(k) is str for k in value):
        return {"t": [[k, _encode(v, depth + 1)] for k, v in value.items()]}
    raise BadEntry(f"a {type(value).__name__} is not kept")


def _entry(fields: Fields, text: str) -> dict[str, Any]:
    doc = _decode(fields.data.get("doc"), 0)
    if not isinstance(doc, dict):
        raise BadEntry("the document is not a table")
    _check_spelled(doc, text)
    return doc


def _decode(value: Any, depth: int) -> Any:
    """The inverse of :func:`_encode`, refusing anything it does not make."""
    if depth > MAX_DEPTH:
        raise BadEntry("too deep")
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        if isinstance(value.get("a"), list):
            return [_decode(v, depth + 1) for v in value["a"]]
        pairs = value.get("t")
        if isinstance(pairs, list) and all(
            isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in pairs
        ):
            table = {k: _decode(v, depth + 1) for k, v in pairs}
            if len(table) == len(pairs):  # no key twice
                return table
    raise BadEntry("not a table, an array or a string")


def _check_spelled(doc: dict[str, Any], text: str) -> None:
    """Every key and string of ``doc`` occurs in ``text`` (each looked for from where the
    one before it was found, as a document follows its file: about linear for a profile)."""
    at = 0
    for word in _words(doc):
        found = text.find(word, at)
        if found < 0:
            found = text.find(word)
        if found < 0:
            raise BadEntry("a string the text does not hold")
        at = found


def _words(value: Any) -> Iterator[str]:
    """The keys and strings of a decoded document, in its order (depth checked before)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _words(item)
    else:
        for item in value:
            yield from _words(item)
