"""Lock matrices: each profile resolved for every Python x platform x torch backend it declares.

A cell is one combination, named ``py3.12-linux-x86_64-cu124``. Locking a cell runs
``uv pip compile`` for that target with hashes, and writes beside each other in
``constraints/<profile>/``:

- ``<cell>.txt``: a constraints file with hashes, for ``uv pip install -c`` or ``pip -c``;
- ``pylock.<cell without dots>.toml``: the same resolution as PEP 751 (PEP 751 forbids dots
  in the name part), which ``envkit build`` installs exactly;
- ``lock.json``: the state of every cell (locked, source-only, unresolvable) and the digest.

Every file starts with a header (profile digest, uv version, index, how to reproduce) and is
otherwise deterministic. Files are written aside and renamed: an interrupted lock never
leaves a half-written file where a published one was.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from envkit.errors import (
    BadInput,
    CommandFailed,
    FileSystemError,
    NetworkError,
    UnreadableFile,
)
from envkit.gpu.needs import backend_summary
from envkit.io import faults, interrupts, process
from envkit.io.atomicfile import temporary_folder, write_atomic
from envkit.io.escaping import shell_command, visible
from envkit.io.http import Http
from envkit.io.redaction import MASK, redact
from envkit.io.uv import Uv
from envkit.lock import companions, extensions, pylocks
from envkit.lock.cells import (
    Cell,
    CellState,
    CellStatus,
    Manifest,
    ManifestEntry,
    TorchOrigin,
    body,
    cells,
    digest,
    held_aside,
    read_lock,
)
from envkit.lock.place import cell_folder
from envkit.lock.reach import probe
from envkit.lock.torchsource import TorchIndex, build_mismatch
from envkit.profiles.profile import PLATFORMS, Profile


@dataclass(frozen=True, kw_only=True)
class LockOptions:
    torch_index: TorchIndex = field(default_factory=TorchIndex)
    index_url: str | None = None
    jobs: int = 4
    root: str | None = None  # the constraints folder
    refresh: bool = False  # ask the index even where uv's cache could answer
    # The Python uv builds source distributions' metadata with (the target version is
    # --python-version): envkit's own, so a lock does not depend on which Pythons the
    # locking machine has, and uv need not search for one.
    interpreter: str = field(default_factory=lambda: os.path.realpath(sys.executable))


@dataclass
class Locker:
    uv: Uv
    options: LockOptions
    progress: Callable[[str], None] = lambda _m: None
    note: Callable[[str], None] = lambda _m: None  # said whether or not on a terminal
    _uv_version: str = field(default="", init=False)
    _http: Http = field(default_factory=Http, init=False)
    _reached: dict[str, NetworkError | None] = field(default_factory=dict, init=False)

    def uv_version(self) -> str:
        if not self._uv_version:
            self._uv_version = self.uv.version()
        return self._uv_version

    def lock(
        self,
        profiles: Iterable[Profile],
        only: str | None = None,
        refused: Mapping[str, str] | None = None,
    ) -> list[CellState]:
        """Resolve every cell (in parallel, ``jobs`` at a time) and write the files. The cells
        of a profile in ``refused`` (name -> why: its pins fail compat) are not resolved and
        leave no file: they come back as ``incompatible`` with the reason."""
        every = [(p, c) for p in profiles for c in cells(p) if only in (None, c.name)]
        if only and not every:
            raise BadInput(
                f"No profile given has a cell named {only!r}.",
                "See the cells with `envkit matrix`.",
            )
        refused = refused or {}
        todo = [(p, c) for p, c in every if p.name not in refused]
        refusals = [
            CellState(cell=c, status=CellStatus.INCOMPATIBLE, reason=refused[p.name])
            for p, c in every
            if p.name in refused
        ]
        # An index this run names must answer before uv is asked: uv's cache could answer
        # for a dead one, and the lock would then name a mirror that was never reached.
        out_of_reach = {c.backend: e for _p, c in todo if (e := self.reach(c.backend))}
        refusals += [
            CellState(cell=c, status=CellStatus.UNREACHABLE, reason=str(out_of_reach[c.backend]))
            for _p, c in todo
            if c.backend in out_of_reach
        ]
        todo = [(p, c) for p, c in todo if c.backend not in out_of_reach]
        if not todo:
            return refusals
        self.uv_version()
        # read each profile once: every file of this run names the content it was locked from
        digests = {p.name: digest(p) for p, _c in todo}
        jobs = max(1, min(self.options.jobs, len(todo)))
        with interrupts.thread_pool(jobs, initializer=process.one_cpu_per_worker(jobs)) as pool:
            results = list(
                pool.map(lambda pc: self._lock_cell(pc[0], pc[1], digests[pc[0].name]), todo)
            )
        for profile in {p.name: p for p, _c in todo}.values():
            mine = [r for r in results if r.cell.profile == profile.name]
            self._write_manifest(profile, digests[profile.name], mine)
        return results + refusals

    def reach(self, backend: str, torch: TorchIndex | None = None) -> NetworkError | None:
        """Why an index this run names for ``backend`` cannot be reached (``--index-url``,
        the torch mirror), or None when each answers. Each is asked once per run: a GET of
        the index root or of the mirror's torch page, read 64 KiB at most; a local index
        must be a folder."""
        torch = torch or self.options.torch_index
        named = [(self.options.index_url, "")] if self.options.index_url else []
        if torch.origin is TorchOrigin.MIRROR:
            named.append((torch.mirror_url(backend), "torch/"))
        for url, page in named:
            if url not in self._reached:
                self._reached[url] = probe(url, page, self._http)
            if self._reached[url] is not None:
                return self._reached[url]
        return None

    def resolve(
        self, profile: Profile, cell: Cell, folder: Path, torch: TorchIndex | None = None,
        *, published: tuple[Path, ...] = (),
    ) -> CellState:  # fmt: skip
        """Resolve one cell into ``folder`` (cell.txt and pylock.toml, bodies only); with its
        ``published`` .txt and pylock, maybe only cell.txt (:meth:`_same`)."""
        (folder / "requirements.in").write_text("\n".join(profile.requirements) + "\n")
        (folder / "constraints.txt").write_text("\n".join(profile.constraints) + "\n")
        options, unset = self._uv_options(profile, cell, torch or self.options.torch_index)
        self.progress(f"resolving {profile.name} / {cell.name}")
        # With exclude_newer the answer cannot depend on when the index is asked, so uv's
        # cache is tried alone first (--offline: none of the revalidation round trips that
        # dominate a warm lock); a cache miss goes to the network, which also decides
        # whether a cell is unresolvable.
        cached_first = bool(profile.exclude_newer) and not self.options.refresh
        torch = torch or self.options.torch_index
        try:
            self._compile(folder, "cell.txt", cell, options, unset, cached_first=cached_first)
            pylock = self._same(folder, cell, torch, published)
            if pylock is None:  # the first output fetched all that the second needs
                self._compile(folder, "pylock.toml", cell, options, unset, cached_first=True)
                pylock = folder / "pylock.toml"
        except CommandFailed as exc:
            return CellState(cell=cell, status=CellStatus.UNRESOLVABLE, reason=_reason(exc.output))
        # a torch of the wrong build is said alone: the extensions would be judged against it
        refused = self._torch_build(cell, pylock, torch) or "; ".join(
            filter(
                None,
                (
                    companions.lock_reason(profile, pylocks.versions(pylock)),
                    self._extensions(profile, cell, pylock, torch),
                ),
            )
        )
        if refused:
            return CellState(cell=cell, status=CellStatus.INCOMPATIBLE, reason=refused)
        sources = pylocks.source_only(pylock)
        return CellState(
            cell=cell,
            status=CellStatus.SOURCE_ONLY if sources else CellStatus.LOCKED,
            source_only=sources,
            reason=(
                "no wheel for this platform, only a source distribution "
                f"(would compile on install): {', '.join(sources)}"
                if sources
                else ""
            ),
        )

    def _same(
        self, folder: Path, cell: Cell, torch: TorchIndex, published: tuple[Path, ...]
    ) -> Path | None:
        """The published pylock when ``folder``'s cell.txt is the published body (every pin,
        and by its hashes every file of each) and the pylock's header names this uv, index and
        torch source: uv would write it again. None otherwise, or with a value masked in its
        body (its URLs would not reach the index)."""
        if not published:
            return None
        txt, pylock = published
        try:
            same = read_lock(folder / "cell.txt") == body(txt)
            text = read_lock(pylock) if same else ""
        except UnreadableFile:
            return None
        head = [line for line in text.splitlines()[:8] if line.startswith("#")]
        wanted = (f"uv: {self.uv_version()}", self._index_line(cell, torch))
        named = all(f"# {visible(w)}" in head for w in wanted)  # as _header writes them
        masked = MASK in text.split("\n", len(head))[-1]
        return pylock if same and named and not masked else None

    def _extensions(self, profile: Profile, cell: Cell, pylock: Path, torch: TorchIndex) -> str:
        """Why a locked package's compiled modules do not link against the cell's torch
        (lock.extensions); '' when they do, or when that could not be read (``note``)."""
        self._remember(cell, torch)
        return extensions.abi_reason(
            profile, cell, pylock, self._http, progress=self.progress, note=self.note
        )

    def _remember(self, cell: Cell, torch: TorchIndex) -> None:
        for index in (self.options.index_url, torch.mirror and torch.mirror_url(cell.backend)):
            if index:
                self._http.remember(index)  # its credentials serve its wheels, as for uv

    def _torch_build(self, cell: Cell, pylock: Path, torch: TorchIndex) -> str:
        """torchsource.build_mismatch for this cell, its index's credentials remembered."""
        self._remember(cell, torch)
        return build_mismatch(cell, pylock, torch, self._http, self.progress, self.note)

    def _compile(
        self,
        folder: Path,
        output: str,
        cell: Cell,
        options: list[str],
        unset: tuple[str, ...],
        *,
        cached_first: bool,
    ) -> None:
        """One uv pip compile; ``cached_first`` tries uv's cache alone before the network."""

        def compile_(extra: list[str]) -> None:
            self.uv.pip_compile(
                folder,
                output,
                python_version=cell.python,
                platform=PLATFORMS[cell.platform],
                interpreter=self.options.interpreter,
                options=[*options, *extra],
                unset_env=unset,
            )

        if cached_first:
            try:
                compile_(["--offline"])
                return
            except CommandFailed:
                pass  # a cache miss: the network decides
        compile_([])

    def _uv_options(
        self, profile: Profile, cell: Cell, torch: TorchIndex
    ) -> tuple[list[str], tuple[str, ...]]:
        options = list(torch.uv_args(cell.backend))
        if self.options.index_url:
            options += ["--default-index", self.options.index_url]
        if profile.exclude_newer:
            options += ["--exclude-newer", profile.exclude_newer]
        # envkit chose where torch comes from; a backend in the environment would overrule it
        chosen = torch.origin is not TorchOrigin.BACKEND
        return options, (("UV_TORCH_BACKEND",) if chosen else ())

    def _lock_cell(self, profile: Profile, cell: Cell, profile_digest: str) -> CellState:
        start = time.monotonic()
        with temporary_folder("lock") as tmp:
            try:
                result = self.resolve(profile, cell, tmp)
            except NetworkError as exc:
                return CellState(
                    cell=cell,
                    status=CellStatus.UNREACHABLE,
                    reason=str(exc),
                    seconds=time.monotonic() - start,
                )
            out = cell_folder(profile, self.options.root)
            files: tuple[Path, ...] = ()
            if not result.status.usable:
                _withdraw(out, profile, cell)
            else:
                try:
                    out.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise FileSystemError(out, exc, "create") from None
                head = self.header(profile, cell, result, profile_digest)
                # uv keeps index credentials out of its output; redaction makes sure of it.
                # A requirements file has no quoting: each line is a value as it stands, so
                # redact() acts on values there; the pylock is TOML, redacted value by value.
                txt = redact(read_lock(tmp / "cell.txt"))
                pylock = head + pylocks.for_cell(
                    pylocks.redacted(read_lock(tmp / "pylock.toml")), cell
                )
                # validated as the bytes written: the header is part of what uv will parse
                pylocks.validate(pylock, f"the pylock of {profile.name} / {cell.name}")
                write_atomic(out / cell.txt_name, head + txt)
                write_atomic(out / cell.pylock_name, pylock)
                files = (out / cell.txt_name, out / cell.pylock_name)
        return dataclasses.replace(
            result, files=files, torch=self.torch_origin, seconds=time.monotonic() - start
        )

    @property
    def torch_origin(self) -> TorchOrigin:
        return self.options.torch_index.origin

    def header(self, profile: Profile, cell: Cell, result: CellState, profile_digest: str) -> str:
        """The comment lines every file of a cell opens with (``needs:``, the driver its
        backend's torch build needs, after the reproduce line). Each value is shown with its
        characters that are not printable as escapes, so none can end its comment line (a
        line break in an index URL would otherwise become a requirement line of its own);
        the reproduce line is quoted word by word for a shell."""
        torch = self.options.torch_index
        command = ["envkit", "lock", profile.name, "--cell", cell.name, *torch.flag()]
        lines = [
            f"envkit lock: profile {profile.name}, cell {cell.name}",
            f"profile-digest: {profile_digest}",
            f"uv: {self.uv_version()}",
            self._index_line(cell, torch),
            f"reproduce: {shell_command(command)}",
        ]
        needs = backend_summary(cell.backend)  # from the backend: the same bytes each lock
        if needs:
            lines.append(f"needs: {needs}")
        if result.status is CellStatus.SOURCE_ONLY:
            lines.append(f"source-only: {', '.join(result.source_only)}")
        return "".join(f"# {visible(line)}\n" for line in lines)

    def _index_line(self, cell: Cell, torch: TorchIndex) -> str:
        index = redact(self.options.index_url) if self.options.index_url else "uv's default index"
        return f"index: {index}; torch: {torch.header_text(cell.backend)}"

    def _write_manifest(
        self, profile: Profile, profile_digest: str, results: list[CellState]
    ) -> None:
        """lock.json: this run's cells over the previous entries of the same digest; cells
        whose index could not be reached keep what was recorded."""
        learnt = [r for r in results if r.status is not CellStatus.UNREACHABLE]
        if not learnt:
            return
        folder = cell_folder(profile, self.options.root)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise FileSystemError(folder, exc, "create") from None
        path = folder / "lock.json"
        # another lock of this profile (other cells, another terminal) merges its cells too:
        # read, merge and write under the file's lock, or one run's cells are lost
        with held_aside(path):
            previous = Manifest.read(path)
            faults.fault_point("manifest-read")
            same = previous is not None and previous.digest == profile_digest
            known = dict(previous.cells) if previous is not None and same else {}
            for r in learnt:
                known[r.cell.name] = ManifestEntry(
                    state=r.status,
                    reason=r.reason,
                    source_only=r.source_only,
                    files=tuple(f.name for f in r.files),
                    torch=r.torch,
                    cell=r.cell.to_dict(),
                )
            Manifest(
                profile=profile.name, digest=profile_digest, uv=self.uv_version(), cells=known
            ).write(path)


def _withdraw(folder: Path, profile: Profile, cell: Cell) -> None:
    """Remove the cell's files an earlier lock published, now that it has none to offer:
    only files whose header says envkit locked them for this profile and cell."""
    mine = f"# envkit lock: profile {profile.name}, cell {cell.name}\n"
    for path in (folder / cell.txt_name, folder / cell.pylock_name):
        try:
            if read_lock(path).startswith(mine):
                path.unlink()
        except (FileNotFoundError, UnreadableFile):
            continue  # nothing there, or not a file envkit wrote
        except OSError as exc:
            raise FileSystemError(path, exc, "remove") from None


def _reason(output: str) -> str:
    """uv's explanation as one readable paragraph."""
    # uv draws its error tree with box characters and a multiplication sign
    kept = [ln.strip(" \u2502\u2570\u2500\u25b6\u00d7") for ln in output.splitlines()]
    text = " ".join(ln.strip() for ln in kept if ln.strip() and not ln.startswith("warning"))
    return redact(text[:1200]) or "uv could not resolve this cell"
