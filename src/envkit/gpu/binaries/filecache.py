"""What was read from each file: :class:`FileCache`, keyed by the reader and by what
identifies the file (device, inode, size, modification and change times), so that a file
two checks read (the linkage and the kernel images) is read once, and a file replaced in
between is read again.

A reader given a :class:`Codec` may also be answered from an earlier run
(:mod:`envkit.gpu.installed.remembered` keeps those answers): only while the file is the
same one, as git's index and uv tell a file unchanged without reading it. Writing to a
file, replacing it or moving another in its place changes its change time, which no
program can set back, or its inode. An answer is kept only for a file whose times were
older than :data:`SETTLED_NS` when it was read (:data:`FINE_SETTLED_NS` where they have a
fraction of a second), so a write within the file system's clock tick after the read cannot
go unseen.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from envkit.io.cache import BadEntry, Fields

T = TypeVar("T")
Stamp = tuple[int, int, int, int, int]  # st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns
# a file changed this recently before a look is read again by the next: longer than a file
# system's clock tick (a kernel tick, 1-10 ms, where times have nanoseconds; 2 s on FAT)
SETTLED_NS = 3_000_000_000
FINE_SETTLED_NS = 100_000_000  # times with a fraction of a second: a clock of 1-10 ms ticks
_UNSET = object()


def stamp(path: Path | str) -> Stamp | None:
    """What identifies the file at ``path`` (followed through links, as it is read); None
    when it cannot be looked at."""
    try:
        found = os.stat(path)
    except (OSError, ValueError):
        return None
    return (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns)


@dataclass(frozen=True)
class Codec(Generic[T]):
    """How one reader's answer is kept between runs: ``encode`` to JSON values, ``decode``
    from them (raising BadEntry on anything else)."""

    name: str  # the answer's key in a file's record: "links", "kernels"
    encode: Callable[[T], dict[str, Any]]
    decode: Callable[[Fields], T]


@dataclass(frozen=True)
class Known:
    """A file's answers from an earlier run, still encoded, with the stamp they are for."""

    stamp: Stamp
    answers: Mapping[str, Fields]


def reader_id(reader: Callable[..., object]) -> str:
    return f"{reader.__module__}.{reader.__qualname__}"


class FileCache:
    """Readers' answers per (reader, path, stamp) for one run; ``reads`` counts the files
    actually read, ``recalled`` the answers taken from ``known`` (an earlier run's, for the
    readers ``codecs`` names by :func:`reader_id`)."""

    def __init__(
        self,
        codecs: Mapping[str, Codec[Any]] | None = None,
        known: Mapping[str, Known] | None = None,
    ) -> None:
        self._memo: dict[tuple[str, str, Stamp | None], object] = {}
        self._codecs = dict(codecs or {})
        self._known = dict(known or {})
        self._started = time.time_ns()
        self.learned: dict[str, tuple[Stamp, dict[str, dict[str, Any]]]] = {}
        self.reads = 0
        self.recalled = 0
        self.new = 0  # answers read this run that the next can recall

    def get(self, path: Path, reader: Callable[[Path], T], key: str = "") -> T:
        """``reader(path)``, read once per run for each ``key`` (what else the reader was
        asked, when it takes more than the path)."""
        found = stamp(path)
        name = reader_id(reader)
        memo_key = (name + key, str(path), found)
        if memo_key in self._memo:
            return cast(T, self._memo[memo_key])
        codec = self._codecs.get(name) if not key and found is not None else None
        value: object = _UNSET
        if codec is not None and found is not None:
            value = self._recall(str(path), found, codec)
        if value is _UNSET:
            self.reads += 1
            value = reader(path)
            if codec is not None and found is not None and self.settled(found):
                self._learn(str(path), found, codec, value)
                self.new += 1
        self._memo[memo_key] = value
        return cast(T, value)

    def settled(self, found: Stamp) -> bool:
        """Whether a file of this stamp last changed long enough before this run began for
        an answer about it to be kept (:data:`SETTLED_NS`), on a file system that keeps a
        change time (one that says 0 keeps none: nothing there is kept)."""
        fine = found[3] % 1_000_000_000 != 0 and found[4] % 1_000_000_000 != 0
        wait = FINE_SETTLED_NS if fine else SETTLED_NS
        return found[4] > 0 and max(found[3], found[4]) < self._started - wait

    def _recall(self, path: str, found: Stamp, codec: Codec[Any]) -> object:
        known = self._known.get(path)
        if known is None or known.stamp != found or codec.name not in known.answers:
            return _UNSET
        fields = known.answers[codec.name]
        try:
            value = codec.decode(fields)
        except BadEntry:
            return _UNSET  # read again; the entry written next holds a good answer
        self.recalled += 1
        self._keep(path, found)[codec.name] = fields.data
        return value

    def _learn(self, path: str, found: Stamp, codec: Codec[Any], value: object) -> None:
        self._keep(path, found)[codec.name] = codec.encode(value)

    def _keep(self, path: str, found: Stamp) -> dict[str, dict[str, Any]]:
        """The answers to keep for ``path`` as it is now (a file replaced during the run:
        what was kept for the one before is dropped)."""
        kept = self.learned.get(path)
        if kept is None or kept[0] != found:
            kept = self.learned[path] = (found, {})
        return kept[1]
