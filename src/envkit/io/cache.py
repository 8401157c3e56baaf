"""envkit's on-disk cache: every kind of entry it keeps, read and written here alone.

The cache lives in ``$ENVKIT_CACHE_DIR`` (else the platform's user cache folder), one folder
per :class:`Kind`, one JSON file per entry. Each kind has a format number (bumped when what
its entries hold changes: older entries are then never read) and a size cap.

An entry is input like any other, since anyone who can write that folder can write it: it
is read only as a regular file (never through a link) within its kind's cap, as plain JSON
(no NaN, no deep nesting), and then by the kind's own parser, which turns it into frozen
data field by field (:class:`Fields`: types, ranges, lengths). An entry that fails any of
it is deleted and reported as absent, so the caller reads the source again and stores a good
one: never a traceback, never a verdict. A cache that cannot be written only costs time.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from platformdirs import user_cache_path

from envkit.errors import EnvkitError, UnreadableFile
from envkit.io.atomicfile import write_atomic
from envkit.io.escaping import MISSING, described
from envkit.io.files import KiB, MiB, read_small_text
from envkit.io.typedjson import JsonObject

T = TypeVar("T")
MAX_ITEMS = 200_000  # entries of one list or table in an entry (a registry has ~500)
MAX_TEXT = 64 * KiB  # characters of one string in an entry
# a key is one file name: versions, index keys, hashes (never a path)
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+!-]{0,199}")


class BadEntry(ValueError):
    """A cache entry that is not what its kind holds; the reader discards it."""


def root() -> Path:
    """The cache folder: ``$ENVKIT_CACHE_DIR``, else the platform's user cache."""
    chosen = os.environ.get("ENVKIT_CACHE_DIR")
    return Path(chosen) if chosen else user_cache_path("envkit")


@dataclass(frozen=True)
class Kind:
    """One kind of entry: its folder, format number and size cap."""

    folder: str
    format: int
    max_bytes: int
    # False: format 1 entries are named without ".v1", as they were before formats were
    # numbered (renaming them would throw every cached answer away); a later format is
    # named ".vN" like the others
    numbered: bool = True

    def path(self, key: str) -> Path:
        numbered = self.numbered or self.format != 1
        return root() / self.folder / (f"{key}.v{self.format}.json" if numbered else f"{key}.json")

    def name(self, key: str) -> str:
        """The entry's name inside the cache folder (``scans/vllm-0.8.5.abc.v2.json``)."""
        return self.path(key).relative_to(root()).as_posix()

    def load(self, key: str, parse: Callable[[Fields], T]) -> T | None:
        """The entry stored under ``key``, as ``parse`` reads it; None when there is none,
        or when it is not a valid entry of this kind (it is then deleted). A knowledge
        snapshot in use (:func:`use_overlay`) answers first; what it holds is never deleted."""
        if not _KEY.fullmatch(key):
            return None
        name = self.name(key)
        if _overlay is not None and name in _overlay:
            try:
                found = parse(Fields(_json(_overlay[name]), self.folder))
            except (ValueError, TypeError, KeyError, RecursionError):
                found = None
            if found is not None:
                _touch(name)
                return found
        path = self.path(key)
        try:
            text = read_small_text(path, self.max_bytes, what="cache entry", follow=False)
        except UnreadableFile as exc:
            if exc.kind != "missing":
                discard(path)  # a link, a FIFO, a huge file: never read, gone
            return None
        try:
            found = parse(Fields(_json(text), self.folder))
        except (ValueError, TypeError, KeyError, RecursionError):  # BadEntry is a ValueError
            discard(path)
            return None
        _touch(name)
        return found

    def store(self, key: str, data: Any) -> None:
        """Write the entry ``data`` (JSON values) under ``key``, atomically; nothing when it
        cannot be written or would be larger than the kind reads back."""
        if not _KEY.fullmatch(key):
            return
        path = self.path(key)
        try:
            text = json.dumps(data, sort_keys=True, allow_nan=False)
            if len(text.encode("utf-8")) > self.max_bytes:
                return
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.is_symlink():
                discard(path)  # write the entry, never whatever the link points at
            write_atomic(path, text, own=True)
        except (OSError, EnvkitError, ValueError, TypeError, RecursionError):
            return  # a cache entry that cannot be written only costs time
        _touch(self.name(key))


# A knowledge snapshot in use: entry name -> its text, read before the folder (set by
# index.snapshot, which has checked every entry's sha256); and the names of the entries a
# run read or wrote, kept while a snapshot is being filled (knowledge export).
_overlay: Mapping[str, str] | None = None
_touched: set[str] | None = None


def use_overlay(entries: Mapping[str, str] | None) -> None:
    """Answer from ``entries`` (names as :meth:`Kind.name` gives them) before the folder;
    None: from the folder alone."""
    global _overlay
    _overlay = entries


def record_touched(on: bool) -> None:
    """Start (or stop) keeping the names of the entries read or written."""
    global _touched
    _touched = set() if on else None


def touched() -> frozenset[str]:
    """The names of the entries read or written since :func:`record_touched`."""
    return frozenset(_touched or ())


def entry_name_ok(name: str) -> bool:
    """Whether ``name`` is an entry's name (``scans/...json``), of a kind envkit keeps."""
    return name.partition("/")[0] in KINDS and _NAME.fullmatch(name) is not None


def _touch(name: str) -> None:
    if _touched is not None:
        _touched.add(name)


def entry_text(name: str) -> str | None:
    """The stored text of the entry ``name`` (the snapshot's first), within its kind's cap;
    None when there is none or ``name`` is not an entry of a kind envkit keeps."""
    kind = KINDS.get(name.partition("/")[0])
    if kind is None or not entry_name_ok(name):
        return None
    if _overlay is not None and name in _overlay:
        return _overlay[name]
    try:
        return read_small_text(root() / name, kind.max_bytes, what="cache entry", follow=False)
    except UnreadableFile:
        return None


def discard(path: Path) -> None:
    """Delete a bad entry (a link is removed, never followed); a folder is left alone."""
    with contextlib.suppress(OSError):
        path.unlink()


def _json(text: str) -> Any:
    def no_constant(name: str) -> Any:
        raise BadEntry(f"{name} is not JSON")

    return json.loads(text, parse_constant=no_constant)


class Fields(JsonObject):
    """One decoded entry (or a table in it), read field by field with its type and range
    checked: the first wrong one raises :class:`BadEntry`. A default given makes the field
    optional (absent, or null, reads as the default)."""

    max_text = MAX_TEXT
    max_items = MAX_ITEMS

    def fail(self, path: str, wanted: str, value: object) -> Exception:
        return BadEntry(f"{path}: expected {wanted}, got {described(value)}")

    @property
    def where(self) -> str:
        """The entry's key path to this table (``scans.v2.models``)."""
        return self.path

    def _value(self, key: str, optional: bool) -> Any:
        value = self.data.get(key)
        if value is None and not optional:
            raise self.fail(self.at(key), "a value", MISSING)
        return value

    def text(self, key: str, default: str | None = None) -> str:
        value = self._value(key, default is not None)
        if value is None and default is not None:
            return default
        return self.text_of(value, self.at(key))

    def whole(self, key: str, default: int | None = None, *, high: int = 2**53) -> int:
        value = self._value(key, default is not None)
        if value is None and default is not None:
            return default
        return self.whole_of(value, self.at(key), high)

    def number(self, key: str, default: float | None = None, *, high: float = 1e9) -> float:
        value = self._value(key, default is not None)
        if value is None and default is not None:
            return default
        return self.number_of(value, self.at(key), high)

    def flag(self, key: str, default: bool | None = None) -> bool:
        value = self._value(key, default is not None)
        if value is None and default is not None:
            return default
        return self.flag_of(value, self.at(key))

    def texts(self, key: str, default: tuple[str, ...] | None = None) -> tuple[str, ...]:
        value = self._value(key, default is not None)
        if value is None and default is not None:
            return default
        where = self.at(key)
        return tuple(self.text_of(v, where) for v in self.list_of(value, where))

    def wholes(self, key: str, *, high: int = 2**63) -> tuple[int, ...]:
        """A list of whole numbers from 0 to ``high`` (a file's stamp: device, inode, size,
        times in nanoseconds)."""
        where = self.at(key)
        found = self.list_of(self._value(key, False), where)
        return tuple(self.whole_of(v, where, high) for v in found)

    def pairs(self, key: str) -> tuple[tuple[str, str], ...]:
        """A list of two-string lists ((module, symbol) and the like); () when absent."""
        value = self._value(key, True)
        if value is None:
            return ()
        where = self.at(key)
        found = []
        for item in self.list_of(value, where):
            if not isinstance(item, list) or len(item) != 2:
                raise self.fail(where, "a list of pairs of strings", item)
            found.append((self.text_of(item[0], where), self.text_of(item[1], where)))
        return tuple(found)

    def text_map(self, key: str, *, optional: bool = True) -> dict[str, str]:
        """An object of strings ({} when absent and ``optional``)."""
        value = self._value(key, optional)
        if value is None:
            return {}
        where = self.at(key)
        return {
            self.text_of(k, where): self.text_of(v, f"{where}.{k}")
            for k, v in self.object_of(value, where).items()
        }

    def tables(self, key: str) -> tuple[Fields, ...]:
        """A list of objects, each read as Fields."""
        where = self.at(key)
        return tuple(Fields(v, where) for v in self.list_of(self._value(key, False), where))

    def table_map(self, key: str, *, optional: bool = True) -> dict[str, Fields]:
        """An object of objects ({} when absent and ``optional``)."""
        value = self._value(key, optional)
        if value is None:
            return {}
        where = self.at(key)
        return {
            self.text_of(k, where): Fields(v, f"{where}.{k}")
            for k, v in self.object_of(value, where).items()
        }

    def table(self, key: str) -> Fields:
        return Fields(self._value(key, False), self.at(key))


# Every kind envkit keeps. Bump a format when what its entries hold changes.
SCANS = Kind("scans", 2, 16 * MiB)  # what a vLLM / transformers release can load (registry)
BOUNDS = Kind("bounds", 2, 4 * MiB)  # vLLM's test-registry bounds per release (testregistry)
COMPAT = Kind("compat", 4, 4 * MiB)  # a vLLM x transformers report (compat.report)
MODEL_TYPES = Kind("site", 1, 8 * MiB, numbered=False)  # arch -> model types (site.data)
TORCH_BUILDS = Kind("torch-builds", 1, 4 * KiB, numbered=False)  # a torch wheel's CUDA
GPU_KERNELS = Kind("gpu-kernels", 1, 1 * MiB)  # what a wheel's compiled modules hold (wheelkernels)
TORCH_NEEDS = Kind("torch-needs", 1, 16 * MiB)  # torch symbols a wheel needs (wheelabi)
TORCH_DEFINES = Kind("torch-defines", 1, 32 * MiB)  # which asked symbols a torch wheel defines
PROFILES = Kind("profiles", 1, 4 * MiB)  # a valid profile's TOML, parsed (profiles.tomldoc)
SERVE_FLAGS = Kind("serve-flags", 1, 4 * MiB)  # vllm serve's flags and VLLM_* names (serveflags)
PYTHONS = Kind("pythons", 1, 8 * KiB)  # an interpreter's version, by its binary (interpreters)
GPU_FILES = Kind("gpu-files", 1, 32 * MiB)  # a site-packages' ELF answers, by file (remembered)

KINDS = {
    k.folder: k
    for k in (SCANS, BOUNDS, COMPAT, MODEL_TYPES, TORCH_BUILDS, GPU_KERNELS, PROFILES, SERVE_FLAGS)
}
# an entry's name: its kind's folder, one file (a key and its format)
_NAME = re.compile(r"[a-z][a-z-]{0,39}/[A-Za-z0-9][A-Za-z0-9._+!-]{0,219}\.json")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def is_sha256(text: str) -> bool:
    """Whether ``text`` is a sha256 as envkit keeps one: 64 lowercase hex digits (a file's
    hash from an index page, the key of a wheel's cache entries, a snapshot member's)."""
    return _SHA256.fullmatch(text) is not None
