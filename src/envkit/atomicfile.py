"""Files that are never half written: write aside, flush to disk, rename over the target.

A reader (or a later envkit after a kill) sees the old file or the new one. Every file
envkit publishes or relies on (profiles, locks, journals, caches) is written here.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_atomic(path: Path, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` in one rename; the temporary file never outlives us."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
