"""The maintainer's command that regenerates envkit's table of vLLM's test-registry bounds
(:mod:`envkit.releases.boundstable`), incrementally: a release whose sdist the table already
names is not read again; with nothing new, nothing is read but the index's file list and
nothing is written::

    python -m envkit.releases.boundsupdate --out src/envkit/data/transformers-bounds.json \\
        [--index-url URL] [--vllm 0.8.5,0.9.0]

Each published vLLM release's sdist is read through the reader ``history`` and ``scan`` use
(:func:`envkit.releases.testregistry.read_sdist`: as it downloads, only up to its test files),
a few at a time; none is cached.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import sys
from pathlib import Path

from packaging.version import InvalidVersion, Version

from envkit.errors import EnvkitError
from envkit.index.pages import WheelFile
from envkit.io import interrupts
from envkit.io.atomicfile import write_atomic
from envkit.io.cache import BadEntry
from envkit.io.files import read_small_text
from envkit.io.http import Http
from envkit.io.redaction import redact
from envkit.io.urls import DEFAULT_INDEX, index_key, index_url
from envkit.releases.boundstable import ABOUT, MAX_TABLE, BoundsTable, Release, dumps, load
from envkit.releases.registry import Scanner
from envkit.releases.testregistry import read_sdist

WORKERS = 4


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m envkit.releases.boundsupdate",
        description="Regenerate envkit's table of vLLM's test-registry transformers bounds.",
    )
    parser.add_argument("--out", required=True, help="the table to write (and update)")
    parser.add_argument("--index-url", help="the package index (default: as uv picks it)")
    parser.add_argument("--vllm", help="only these vLLM releases (comma-separated)")
    args = parser.parse_args(argv)
    say = functools.partial(print, file=sys.stderr, flush=True)
    try:
        only = {Version(v) for v in args.vllm.split(",")} if args.vllm else None
    except InvalidVersion as exc:
        say(f"error: --vllm: {exc}")
        return 2
    out = Path(args.out)
    try:
        old = (
            load(read_small_text(out, MAX_TABLE, what="bounds table"), str(out))
            if out.exists()
            else None
        )
        index = index_url(args.index_url)
        if old is not None and old.index != index_key(index):
            say(f"{out} was read from another index: it is read again whole")
            old = None
        table, read = update(
            Scanner(index, use_cache=False, http=Http(budget=86400.0), progress=say), old, only
        )
    except (EnvkitError, BadEntry, InvalidVersion) as exc:
        say(f"error: {exc.message if isinstance(exc, EnvkitError) else exc}")
        return 2
    if not read:
        say(f"{out} holds every vLLM release's sdist on {redact(index)}: nothing written")
        return 0
    try:
        write_atomic(out, dumps(table))
    except EnvkitError as exc:
        say(f"error: {exc.message}")
        return 2
    say(f"wrote {out}: {len(table.releases)} vLLM releases, {read} new")
    return 0


def update(
    scanner: Scanner, old: BoundsTable | None, only: set[Version] | None = None
) -> tuple[BoundsTable, int]:
    """The table with every published vLLM release's sdist (or those of ``only``) that
    ``old`` does not name read in, and how many entries are new (sdists read, releases
    found to publish none). A release whose sdist cannot be read is left out (said through
    the scanner's progress), to be read the next time."""
    releases = dict(old.releases) if old is not None else {}
    listed = scanner.sdists("vllm")
    wanted = {v for v in [*listed, *scanner.releases("vllm")] if not v.is_prerelease}
    wanted = {v for v in wanted if only is None or v in only}
    new = [
        (v, listed[v])
        for v in sorted(wanted)
        if v in listed and (v not in releases or releases[v].sdist != listed[v].filename)
    ]
    gone = [v for v in sorted(wanted - set(listed)) if v not in releases or releases[v].sdist]
    for version in gone:  # a wheel, no sdist: a fact of the index, said as such
        releases[version] = Release(str(version), "", False)

    def one(item: tuple[Version, WheelFile]) -> Release | None:
        version, sdist = item
        try:
            found, registry = read_sdist(scanner, version, sdist)
        except EnvkitError as exc:
            scanner.progress(f"vLLM {version}'s sdist left out: {exc.message}")
            return None
        return Release(str(version), sdist.filename, registry, found)

    with interrupts.thread_pool(WORKERS) as pool:
        for release in pool.map(one, new):
            if release is not None:
                releases[Version(release.version)] = release
    source = (
        "the package index" if scanner.index.rstrip("/") == DEFAULT_INDEX else redact(scanner.index)
    )
    table = BoundsTable(
        about=ABOUT,
        generated=dt.date.today().isoformat() if new or gone else (old.generated if old else ""),
        source=f"{source} (each sdist read as it downloads, up to its test files)",
        index=index_key(scanner.index),
        releases=releases,
    )
    return table, len(new) + len(gone)


if __name__ == "__main__":
    raise SystemExit(main())
