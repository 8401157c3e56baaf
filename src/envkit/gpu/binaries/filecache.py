"""What was read from each file in one run: :class:`FileCache`, keyed by the file's path,
size and modification time and by the reader, so that a file two checks read (the linkage
and the kernel images) is read once, and a file replaced in between is read again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar, cast

T = TypeVar("T")


class FileCache:
    """Readers' answers per (reader, path, size, mtime) for one run; ``reads`` counts the
    files actually read."""

    def __init__(self) -> None:
        self._memo: dict[tuple[str, str, int, int], object] = {}
        self.reads = 0

    def get(self, path: Path, reader: Callable[[Path], T], key: str = "") -> T:
        """``reader(path)``, read once per run for each ``key`` (what else the reader was
        asked, when it takes more than the path)."""
        try:
            info = path.stat()
            stamp = (info.st_size, info.st_mtime_ns)
        except OSError:
            stamp = (-1, -1)
        memo_key = (f"{reader.__module__}.{reader.__qualname__}{key}", str(path), *stamp)
        if memo_key not in self._memo:
            self.reads += 1
            self._memo[memo_key] = reader(path)
        return cast(T, self._memo[memo_key])
