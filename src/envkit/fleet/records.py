"""Whether an installed distribution's files are the ones its wheel installed.

A wheel's ``RECORD`` lists the sha256 of every file it installs, and installers (uv, pip)
keep that list in the installed ``.dist-info``; the lock's hashes are those of the wheel
archives the files came from, which an installed tree no longer holds. So a node's locked
distribution is judged by two facts: its version is the locked one (``judge``), and its
files still have the hashes RECORD gives (here): a file edited, replaced or deleted after
the install is ``modified``. RECORD is read through ``io.files`` (a regular file of at most
MAX_RECORD_BYTES, UTF-8 CSV: one that is not is ``unrecorded``, nothing to compare), the name
from METADATA by its one reader (``index.metadata``); each file it lists is opened as a
regular file and hashed in chunks, never read whole.
"""

from __future__ import annotations

import base64
import csv
import hashlib
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath

from packaging.utils import canonicalize_name

from envkit.errors import UnreadableFile
from envkit.fleet.fingerprint import MAX_NAMES, Distribution, Files
from envkit.index.metadata import read_installed
from envkit.io.files import MiB, open_regular, read_small_text

MAX_RECORD_ENTRIES = 200_000  # files of one distribution (torch has ~15,000)
MAX_RECORD_BYTES = 32 * MiB  # MAX_RECORD_ENTRIES lines of 160 bytes (torch's is ~2 MB)
_CHUNK = 1024 * 1024


def installed(
    site_packages: Iterable[str], versions: dict[str, str], hashes: bool
) -> Iterator[Distribution]:
    """Each distribution in ``versions`` (canonical name -> version, from the venv's probe),
    with its files judged against its RECORD when ``hashes`` (else ``unchecked``)."""
    found: dict[str, Path] = {}
    if hashes:
        for folder in (Path(p) for p in site_packages if p):
            for info in sorted(folder.glob("*.dist-info")):
                try:  # the name as METADATA says it, read by the one reader of that file
                    name = read_installed(info / "METADATA").name
                except UnreadableFile:
                    continue
                # the first on the path is the one imported
                found.setdefault(canonicalize_name(name), info)
    for name in sorted(versions):
        seen = found.get(name)
        if not hashes:
            yield Distribution(name, versions[name])
        elif seen is None:
            yield Distribution(name, versions[name], Files.UNRECORDED)
        else:
            state, modified = check(seen)
            yield Distribution(name, versions[name], state, modified)


def entries(info: Path) -> list[tuple[str, str]] | None:
    """The (path, hash) rows of ``info``'s RECORD, a hash ``mode=value`` or ''; None when
    it cannot be read: missing, not a regular file, over MAX_RECORD_BYTES, not UTF-8, not CSV."""
    try:
        text = read_small_text(info / "RECORD", MAX_RECORD_BYTES, what="RECORD")
        rows = list(csv.reader(text.splitlines()))
    except (UnreadableFile, csv.Error):
        return None
    return [(row[0], row[1] if len(row) > 1 else "") for row in rows if row and row[0]]


def check(info: Path) -> tuple[Files, tuple[str, ...]]:
    """The files' state and the first of those that differ from RECORD (paths in it are
    relative to the folder holding ``info``, the site-packages)."""
    rows = entries(info)
    hashed = [(path, digest) for path, digest in rows or () if digest]
    if not hashed or len(hashed) > MAX_RECORD_ENTRIES:
        return Files.UNRECORDED, ()
    modified: list[str] = []
    for path, digest in hashed:
        mode, _, value = digest.partition("=")
        if mode != "sha256" or _sha256(info.parent / path) != value:
            modified.append(str(PurePosixPath(path)))
            if len(modified) >= MAX_NAMES:
                break
    return (Files.MODIFIED if modified else Files.INTACT), tuple(modified)


def _sha256(path: Path) -> str:
    """The file's sha256 as RECORD writes it (urlsafe base64, no padding); '' when missing
    or not a regular file."""
    digest = hashlib.sha256()
    try:
        with open_regular(path, what="installed file") as stream:
            while chunk := stream.read(_CHUNK):
                digest.update(chunk)
    except (UnreadableFile, OSError):
        return ""
    return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii")
