"""``envkit refresh``: envkit's knowledge brought up to date from the index, touching only
what is new.

The vLLM releases the index lists that the kernel table (the user's refreshed copy, else
envkit's own) holds neither a build nor a "no wheel" fact for are read, with the torch
releases they pin (:func:`envkit.gpu.published.kernelgen.harvest`; a wheel whose sha256 the table
already holds is not read again), and merged into the table as the maintainer's
regeneration merges them (:func:`envkit.gpu.published.kernelupdate.merged`); the table is written to
the user's data folder (or ``--out``) only when something changed. Each new release's
registry and test-registry bounds are read into the cache, so check-model, history and
``knowledge export`` find them there. Nothing new: nothing read but the index's file list,
nothing written.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from envkit.errors import EnvkitError
from envkit.gpu.published import kernelgen, kerneltable, kernelupdate
from envkit.gpu.published.kerneltable import MAX_TABLE, X86, KernelTable
from envkit.index.session import IndexSession
from envkit.io.atomicfile import write_atomic
from envkit.io.cache import BadEntry
from envkit.io.files import present, read_small_text
from envkit.io.http import Http
from envkit.io.redaction import redact
from envkit.releases.registry import Scanner
from envkit.releases.testregistry import transformers_bounds
from envkit.wording import counted

BUDGET = 4 * 3600.0  # seconds of transfers: a new release's wheel is read by range


@dataclass(frozen=True)
class Refreshed:
    """What one refresh found new and did."""

    out: str  # the table written (or that would have been)
    index: str  # without credentials
    platform: str
    releases: int  # vLLM releases the index lists
    new_vllm: tuple[str, ...]  # releases added to the kernel table
    new_torch: tuple[str, ...]  # torch builds added: '2.7.0 (CUDA 12.6)'
    no_wheel: tuple[str, ...]  # new releases with no wheel for the platform (a fact kept)
    cached: tuple[str, ...]  # what was read into the cache: 'vllm 0.9.0 registry'
    notes: tuple[str, ...]  # what could not be read, and why
    written: bool
    fetched: int  # bytes
    seconds: float

    @property
    def changed(self) -> bool:
        return bool(self.new_vllm or self.new_torch or self.no_wheel or self.cached)

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": self.out,
            "index": self.index,
            "platform": self.platform,
            "releases": self.releases,
            "changed": self.changed,
            "written": self.written,
            "new_vllm": list(self.new_vllm),
            "new_torch": list(self.new_torch),
            "no_wheel": list(self.no_wheel),
            "cached": list(self.cached),
            "notes": list(self.notes),
            "bytes_fetched": self.fetched,
            "seconds": self.seconds,
        }


def base_table(out: Path | None) -> KernelTable:
    """The table a refresh starts from: ``out`` when it exists, else the one lookups read."""
    if out is not None and present(out):
        try:
            return kerneltable.load(read_small_text(out, MAX_TABLE, what="kernel table"))
        except BadEntry as exc:
            raise EnvkitError(
                f"The kernel table {str(out)!r} is not one envkit writes: {exc}.",
                "Give --out a table written by envkit refresh, or a new file.",
            ) from None
    return kerneltable.shipped()


_NOTED = re.compile(r"\bvllm ([0-9][0-9A-Za-z.+!-]{0,40}): ")


def noted(table: KernelTable) -> set[Version]:
    """The vLLM releases a note of the table is about (read before and found without GPU
    kernels or a sha256): read again only by the maintainer's regeneration."""
    found: set[Version] = set()
    for note in table.notes:
        for match in _NOTED.finditer(note[:2000]):
            with contextlib.suppress(InvalidVersion):
                found.add(Version(match.group(1)))
    return found


def refresh(
    index: str,
    *,
    out: Path | None = None,
    platform: str = X86,
    progress: Callable[[str], None] = lambda _m: None,
) -> Refreshed:
    """Read what ``index`` publishes that the kernel table lacks (see the module's doc)."""
    target = out or kerneltable.refreshed_path()
    old = base_table(out)
    http = Http(budget=BUDGET)
    session = IndexSession(index, http=http, use_cache=False, progress=progress)
    listed = session.releases("vllm")
    held = {Version(b.version) for b in old.vllm if b.platform == platform}
    held |= {Version(v) for p, v in old.no_wheel if p == platform}
    held |= noted(old)
    new = [v for v in listed if v not in held]
    label = redact(session.index)
    if not new:
        progress(f"the kernel table holds every vLLM release on {label}")
        return Refreshed(
            str(target), label, platform, len(listed), (), (), (), (), (), False, 0, 0.0
        )
    progress(f"{counted(len(new), 'vLLM release')} new on {label}: {', '.join(map(str, new))}")
    known = {w.sha256: w for w in (*(b.wheel for b in old.vllm), *(b.wheel for b in old.torch))}
    found = kernelgen.harvest(
        session.index,
        http,
        versions=[str(v) for v in new],
        known=known,
        progress=progress,
        platform=platform,
    )
    table = kernelupdate.merged(
        old, found, [str(v) for v in new], session.index, others=True, platform=platform
    )
    before_torch = {(t.version, t.cuda, t.platform) for t in old.torch}
    new_torch = tuple(
        f"{t.version} (CUDA {t.cuda or 'none'})"
        for t in table.torch
        if (t.version, t.cuda, t.platform) not in before_torch
    )
    added = tuple(
        b.version for b in table.vllm if b.platform == platform and Version(b.version) in new
    )
    no_wheel = tuple(found.no_wheel)
    cached, notes = _cache_registries(session.index, http, new, progress)
    notes = [*found.notes, *notes]
    written = bool(added or new_torch or no_wheel)
    if written:
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, kerneltable.dumps(table))
    return Refreshed(
        str(target),
        label,
        platform,
        len(listed),
        added,
        new_torch,
        no_wheel,
        cached,
        tuple(notes),
        written,
        http.traffic.bytes,
        found.seconds,
    )


def _cache_registries(
    index: str, http: Http, new: list[Version], progress: Callable[[str], None]
) -> tuple[tuple[str, ...], list[str]]:
    """Each new release's registry and test-registry bounds, read into the cache; those
    already there are not read again, nor said."""
    scanner = Scanner(index, http=http, progress=progress)
    cached: list[str] = []
    notes: list[str] = []
    for version in new:
        for what, work in (
            ("registry", lambda v=version: scanner.scan("vllm", v)),
            ("test-registry bounds", lambda v=version: transformers_bounds(scanner, v)),
        ):
            before = http.traffic.requests
            try:
                work()
            except EnvkitError as exc:
                notes.append(f"vllm {version}: its {what} not read: {exc.message}")
                continue
            if http.traffic.requests != before:  # read now, not found in the cache
                cached.append(f"vllm {version} {what}")
    return tuple(cached), notes
