"""The index session: one index, one HTTP client, each project's file list read once per run.

Every reader of the index (scans, compat, vLLM's test registry, torch builds, history, the
solver and the site) shares one session, so an index page is fetched once per run however many
of them ask. What a release holds is read by ``releases.registry.Scanner``, which is a session.
With a knowledge snapshot in use (``--knowledge``, :mod:`envkit.index.snapshot`), a session
lists files from it, its index is the snapshot's and its client sends nothing.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from packaging.version import Version

from envkit.errors import NetworkError
from envkit.io.redaction import redact

if TYPE_CHECKING:  # a session whose answers are all cached reads no page and makes no client
    from envkit.index.pages import WheelFile
    from envkit.index.snapshot import Listing, Snapshot
    from envkit.io.http import Http

MAX_RELEASES = 1_000  # transformers, the longest history envkit reads, has about 200


class IndexSession:
    """One index's file lists, read on first use and kept for the run."""

    def __init__(
        self,
        index: str,
        *,
        use_cache: bool = True,
        http: Http | None = None,
        progress: Callable[[str], None] = lambda _m: None,
    ) -> None:
        known = active_snapshot()
        self.snapshot = known
        self.index = known.index if known is not None else index
        self.use_cache = use_cache  # False: every reader goes to the index, not envkit's cache
        self._http = http
        self._making = threading.Lock()  # the readers that share a session run side by side
        if known is not None:
            from envkit.index.snapshot import NoNetwork

            self._http = NoNetwork(snapshot=known)
        self.progress = progress  # hears each release read from the index (not the cache)
        self._files: dict[str, list[WheelFile]] = {}
        self._sdists: dict[str, dict[Version, WheelFile]] = {}
        # each page read once: what it lists that was not asked for yet waits here
        self._page_sdists: dict[str, list[WheelFile]] = {}
        self._page_wheels: dict[str, list[WheelFile]] = {}
        self._by_version: dict[str, dict[Version, list[WheelFile]]] = {}

    @property
    def http(self) -> Http:
        """The session's one client, made when first asked for (once, whichever of the
        threads reading through the session asks first)."""
        with self._making:
            if self._http is None:
                from envkit.io.http import Http

                self._http = Http()
            return self._http

    def files(self, project: str) -> list[WheelFile]:
        """The project's wheels on the index."""
        if project not in self._files:
            if self.snapshot is not None:
                self._files[project] = list(self.snapshot.listing(project).wheels)
            else:
                self._files[project] = self._page(project, self._page_wheels)
        return self._files[project]

    def sdists(self, project: str) -> dict[Version, WheelFile]:
        """The project's source distributions on the index, by version."""
        if project not in self._sdists:
            if self.snapshot is not None:
                held: Iterable[WheelFile] = self.snapshot.listing(project).sdists
            else:
                held = self._page(project, self._page_sdists)
            self._sdists[project] = {f.version: f for f in held}
        return self._sdists[project]

    def _page(self, project: str, waiting: dict[str, list[WheelFile]]) -> list[WheelFile]:
        """One kind of file the project's page lists, ``waiting`` its kind's store: what a
        read of the page for the other kind left there, else the page read now (and the
        other kind left for its first ask)."""
        held = waiting.pop(project, None)
        if held is not None:
            return held
        from envkit.index.pages import list_page

        wheels, sdists = list_page(project, self.index, self.http)
        if waiting is self._page_wheels:
            if project not in self._sdists:
                self._page_sdists[project] = sdists
            return wheels
        if project not in self._files:
            self._page_wheels[project] = wheels
        return sdists

    def listings(self) -> dict[str, Listing]:
        """The file lists this session read, per project (what a snapshot keeps)."""
        from envkit.index.snapshot import Listing

        return {
            project: Listing(
                tuple(self._files.get(project, ())),
                tuple(self._sdists.get(project, {}).values()),
            )
            for project in sorted({*self._files, *self._sdists})
        }

    def wheels(self, project: str, version: Version) -> list[WheelFile]:
        """The wheels of one release (looked up, not searched: a page may list thousands)."""
        if project not in self._by_version:
            table: dict[Version, list[WheelFile]] = {}
            for wheel in self.files(project):
                table.setdefault(wheel.version, []).append(wheel)
            self._by_version[project] = table
        return self._by_version[project].get(version, [])

    def pick(self, project: str, version: Version) -> WheelFile:
        """One wheel of the release (``pages.pick_wheel``'s choice); WheelError naming the
        project, this index and the newest release it lists when it lists none of it."""
        from envkit.index.pages import no_wheel, pick_wheel

        found = self.wheels(project, version)
        if not found:
            raise no_wheel(self.files(project), version, project=project, index=self.index)
        return pick_wheel(found, version)

    def releases(self, project: str) -> list[Version]:
        """Every release with a wheel, oldest first (pre-releases left out). NetworkError for
        an index listing more than MAX_RELEASES: each costs a wheel read in history and site."""
        found = sorted({f.version for f in self.files(project) if not f.version.is_prerelease})
        if len(found) > MAX_RELEASES:
            raise NetworkError(
                f"The index {redact(self.index)} lists {len(found):,} releases of {project}; "
                f"envkit reads at most {MAX_RELEASES:,} (real projects publish a few hundred).",
                "Use another index (--index-url): this one is not a release index.",
                url=redact(self.index),
                kind="bad-answer",
            )
        return found

    def upload_time(self, project: str, version: Version) -> str | None:
        """When the release's first file was published, or None when the index does not say."""
        times = [f.upload_time for f in self.wheels(project, version)]
        return min((t for t in times if t), default=None)


def active_snapshot() -> Snapshot | None:
    """The knowledge snapshot in use: none unless something imported the snapshot module,
    as putting one in use does (``--knowledge``); a session of a run without one does not
    load the snapshot reader and its archive checks."""
    if "envkit.index.snapshot" not in sys.modules:
        return None
    from envkit.index import snapshot

    return snapshot.active()
