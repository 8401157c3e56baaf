"""`envkit site --out DIR`: writes the pages (html.py) and copies the published
constraints into DIR.

DIR must be empty, missing, or a site envkit wrote before (its ``.envkit-site.json`` lists
the files it wrote); a rerun replaces those files and deletes the ones it no longer writes,
never anything else.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from envkit.errors import BadInput, FileSystemError, UnreadableFile
from envkit.io.atomicfile import writable, write_atomic
from envkit.io.files import MiB, read_small_text
from envkit.lock.cells import read_lock_bytes
from envkit.site import html
from envkit.site.data import SiteData

MARKER = ".envkit-site.json"


@dataclass(frozen=True)
class SiteResult:
    out: Path
    files: tuple[str, ...]  # relative to out, sorted
    bytes: dict[str, int]  # file -> size
    matrix_bytes: int  # the matrix page with its stylesheet and script

    def to_dict(self) -> dict[str, object]:
        return {
            "out": str(self.out),
            "files": list(self.files),
            "bytes": sum(self.bytes.values()),
            "matrix_bytes": self.matrix_bytes,
        }


def previous_files(out: Path) -> list[str]:
    """What an earlier `envkit site` wrote into ``out``; BadInput when ``out`` holds anything
    else (envkit does not write over, or delete, what it did not make), and when the folder
    cannot be made or written: the nearest one that exists must take a file (a file made
    there and removed), which is known before any read, not after the minutes of a cold run."""
    if not out.exists():
        ancestor = next((p for p in out.absolute().parents if p.exists()), None)
        if ancestor is None or not ancestor.is_dir():
            raise BadInput(
                f"--out {str(out)!r} cannot be made: {str(ancestor)!r} is not a folder.",
                "Give a folder for the site.",
            )
        try:
            writable(ancestor / MARKER)
        except FileSystemError as exc:
            reason = os.strerror(exc.errno) if exc.errno else "it takes no file"
            raise BadInput(
                f"--out {str(out)!r} cannot be made: {str(ancestor)!r} takes no new file "
                f"({reason}); nothing was read or written.",
                "Give a folder you can write, or check its permissions and free space.",
            ) from None
        return []
    if not out.is_dir():
        raise BadInput(f"--out {str(out)!r} is a file.", "Give a folder for the site.")
    entries = [p.name for p in out.iterdir()]
    if not entries:
        return []
    try:
        text = read_small_text(out / MARKER, 4 * MiB, what="site marker")
        listed = json.loads(text)["files"]
        if not isinstance(listed, list) or not all(isinstance(f, str) for f in listed):
            raise ValueError
    except (UnreadableFile, ValueError, KeyError, TypeError, RecursionError):
        raise BadInput(
            f"--out {str(out)!r} is not empty and is not a site envkit wrote "
            f"(no {MARKER}); its entries: {', '.join(sorted(entries)[:5])}.",
            "Give an empty or new folder.",
        ) from None
    return [f for f in listed if _safe(f)]


def _safe(relative: str) -> bool:
    parts = Path(relative).parts
    return bool(parts) and not Path(relative).is_absolute() and ".." not in parts


def write(out: Path, data: SiteData) -> SiteResult:
    before = previous_files(out)
    pages: dict[str, str | bytes] = {
        "index.html": html.index(data),
        "compat.html": html.compat_page(data),
        "profiles.html": html.profiles_index(data),
        "sources.html": html.sources_page(data),
        **dict(html.assets()),
    }
    for item in data.profiles:
        name = item.profile.name
        pages[f"profiles/{name}.html"] = html.profile_page(item)
        for path in item.files:
            pages[f"constraints/{name}/{path.name}"] = read_lock_bytes(path)
    try:
        for relative, content in sorted(pages.items()):
            target = out / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            blob = content.encode("utf-8") if isinstance(content, str) else content
            write_atomic(target, blob)
        for stale in sorted(set(before) - set(pages)):
            (out / stale).unlink(missing_ok=True)
        files = sorted(pages)
        write_atomic(out / MARKER, json.dumps({"files": files}, indent=1) + "\n")
    except OSError as exc:
        raise FileSystemError(out, exc) from None
    sizes = {f: len(c.encode() if isinstance(c, str) else c) for f, c in pages.items()}
    matrix = sum(sizes[f] for f in ("index.html", "site.css", "site.js"))
    return SiteResult(out=out, files=tuple(files), bytes=sizes, matrix_bytes=matrix)
