"""The index session: one index, one HTTP client, each project's file list read once per run.

Every reader of the index (scans, compat, vLLM's test registry, torch builds, history, the
solver and the site) shares one session, so an index page is fetched once per run however many
of them ask. What a release holds is read by ``releases.registry.Scanner``, which is a session.
"""

from __future__ import annotations

from collections.abc import Callable

from packaging.version import Version

from envkit.index.wheels import WheelFile, list_files, list_sdists
from envkit.io.http import Http


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
        self.index = index
        self.use_cache = use_cache  # False: every reader goes to the index, not envkit's cache
        self.http = http or Http()
        self.progress = progress  # hears each release read from the index (not the cache)
        self._files: dict[str, list[WheelFile]] = {}
        self._sdists: dict[str, dict[Version, WheelFile]] = {}

    def files(self, project: str) -> list[WheelFile]:
        """The project's wheels on the index."""
        if project not in self._files:
            self._files[project] = list_files(project, self.index, self.http)
        return self._files[project]

    def sdists(self, project: str) -> dict[Version, WheelFile]:
        """The project's source distributions on the index, by version."""
        if project not in self._sdists:
            self._sdists[project] = list_sdists(project, self.index, self.http)
        return self._sdists[project]

    def releases(self, project: str) -> list[Version]:
        """Every release with a wheel, oldest first (pre-releases left out)."""
        return sorted({f.version for f in self.files(project) if not f.version.is_prerelease})

    def upload_time(self, project: str, version: Version) -> str | None:
        """When the release's first file was published, or None when the index does not say."""
        times = [f.upload_time for f in self.files(project) if f.version == version]
        return min((t for t in times if t), default=None)
