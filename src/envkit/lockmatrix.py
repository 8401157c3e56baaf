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

import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit

from . import process
from .atomicfile import temporary_folder, write_atomic
from .errors import BadInput, CommandFailed, FileSystemError, NetworkError
from .profile import PLATFORMS, Profile
from .redaction import redact
from .uvtool import Uv

LOCKED, SOURCE_ONLY, UNRESOLVABLE = "locked", "source-only", "unresolvable"
STALE, MISSING = "stale", "missing"
# An index could not be reached: not a verdict on the cell, so never recorded or published.
UNREACHABLE = "unreachable"


@dataclass(frozen=True, kw_only=True)
class Cell:
    profile: str
    python: str
    platform: str
    backend: str

    @property
    def name(self) -> str:
        return f"py{self.python}-{self.platform}-{self.backend or 'any'}"

    @property
    def pylock_name(self) -> str:
        return f"pylock.{self.name.replace('.', '')}.toml"

    def to_dict(self) -> dict[str, str]:
        return {
            "profile": self.profile,
            "cell": self.name,
            "python": self.python,
            "platform": self.platform,
            "backend": self.backend or "any",
        }


def machine_platform() -> str:
    """This machine as a matrix platform name (linux-x86_64, ...)."""
    import platform
    import sys

    machine = platform.machine().lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    system = {"darwin": "macos", "win32": "windows"}.get(sys.platform, sys.platform)
    if system == "macos" and arch == "aarch64":
        return "macos-arm64"
    return f"{system}-{arch}"


def cells(profile: Profile) -> list[Cell]:
    return [
        Cell(profile=profile.name, python=py, platform=plat, backend=backend)
        for py in profile.matrix.python
        for plat in profile.matrix.platforms
        for backend in (profile.matrix.backends or ("",))
    ]


def digest(profile: Profile) -> str:
    """The profile's content digest: any edit of the file makes its locks stale."""
    data = profile.path.read_bytes().replace(b"\r\n", b"\n")
    return "sha256:" + hashlib.sha256(data).hexdigest()


def constraints_root(profile: Profile, option: str | None = None) -> Path:
    """``--constraints DIR``, ``$ENVKIT_CONSTRAINTS``, else ``constraints/`` beside ``envs/``."""
    chosen = option or os.environ.get("ENVKIT_CONSTRAINTS")
    return Path(chosen) if chosen else profile.path.resolve().parent.parent / "constraints"


@dataclass(frozen=True, kw_only=True)
class CellResult:
    cell: Cell
    state: str
    reason: str = ""
    source_only: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.cell.to_dict(),
            "state": self.state,
            "reason": self.reason,
            "source_only": list(self.source_only),
            "files": list(self.files),
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True, kw_only=True)
class LockOptions:
    torch_index: str | None = None  # None: --torch-backend per cell; "default"; or a URL
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
    _uv_version: str = field(default="", init=False)

    def uv_version(self) -> str:
        if not self._uv_version:
            self._uv_version = self.uv.version()
        return self._uv_version

    def lock(self, profiles: Iterable[Profile], only: str | None = None) -> list[CellResult]:
        """Resolve every cell (in parallel, ``jobs`` at a time) and write the files."""
        todo = [(p, c) for p in profiles for c in cells(p) if only in (None, c.name)]
        if only and not todo:
            raise BadInput(
                f"No profile given has a cell named {only!r}.",
                "See the cells with `envkit matrix`.",
            )
        self.uv_version()
        # read each profile once: every file of this run names the content it was locked from
        digests = {p.name: digest(p) for p, _c in todo}
        jobs = max(1, min(self.options.jobs, len(todo)))
        with ThreadPoolExecutor(
            max_workers=jobs, initializer=process.one_cpu_per_worker(jobs)
        ) as pool:
            results = list(
                pool.map(lambda pc: self._lock_cell(pc[0], pc[1], digests[pc[0].name]), todo)
            )
        for profile in {p.name: p for p, _c in todo}.values():
            mine = [r for r in results if r.cell.profile == profile.name]
            self._write_manifest(profile, digests[profile.name], mine)
        return results

    def resolve(self, profile: Profile, cell: Cell, folder: Path) -> CellResult:
        """Resolve one cell into ``folder`` (cell.txt and pylock.toml, bodies only)."""
        (folder / "requirements.in").write_text("\n".join(profile.requirements) + "\n")
        (folder / "constraints.txt").write_text("\n".join(profile.constraints) + "\n")
        options, unset = self._uv_options(profile, cell)
        self.progress(f"resolving {profile.name} / {cell.name}")
        # With exclude_newer the answer cannot depend on when the index is asked, so uv's
        # cache is tried alone first (--offline: none of the revalidation round trips that
        # dominate a warm lock); a cache miss goes to the network, which also decides
        # whether a cell is unresolvable.
        cached_first = bool(profile.exclude_newer) and not self.options.refresh
        try:
            for output in ("cell.txt", "pylock.toml"):
                self._compile(folder, output, cell, options, unset, cached_first=cached_first)
                cached_first = True  # the first output fetched all that the second needs
        except CommandFailed as exc:
            return CellResult(cell=cell, state=UNRESOLVABLE, reason=_reason(exc.output))
        sources = source_only(folder / "pylock.toml")
        return CellResult(
            cell=cell,
            state=SOURCE_ONLY if sources else LOCKED,
            source_only=sources,
            reason=(
                "no wheel for this platform, only a source distribution "
                f"(would compile on install): {', '.join(sources)}"
                if sources
                else ""
            ),
        )

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

    def _uv_options(self, profile: Profile, cell: Cell) -> tuple[list[str], tuple[str, ...]]:
        options: list[str] = []
        choice = self.options.torch_index or ""
        if choice == "default":
            pass
        elif choice:
            options += ["--index", choice.replace("{backend}", cell.backend or "cpu")]
        elif cell.backend:
            options += ["--torch-backend", cell.backend]
        if self.options.index_url:
            options += ["--default-index", self.options.index_url]
        if profile.exclude_newer:
            options += ["--exclude-newer", profile.exclude_newer]
        return options, (("UV_TORCH_BACKEND",) if choice else ())

    def _lock_cell(self, profile: Profile, cell: Cell, profile_digest: str) -> CellResult:
        start = time.monotonic()
        with temporary_folder("lock") as tmp:
            try:
                result = self.resolve(profile, cell, tmp)
            except NetworkError as exc:
                return CellResult(
                    cell=cell,
                    state=UNREACHABLE,
                    reason=str(exc),
                    seconds=time.monotonic() - start,
                )
            out = constraints_root(profile, self.options.root) / profile.name
            files: tuple[str, ...] = ()
            if result.state != UNRESOLVABLE:
                try:
                    out.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise FileSystemError(out, exc, "create") from None
                head = self.header(profile, cell, result, profile_digest)
                # uv keeps index credentials out of its output; redact() makes sure of it
                for name, made in (
                    (f"{cell.name}.txt", "cell.txt"),
                    (cell.pylock_name, "pylock.toml"),
                ):
                    write_atomic(out / name, head + redact((tmp / made).read_text()))
                files = (f"{cell.name}.txt", cell.pylock_name)
        return CellResult(
            cell=cell,
            state=result.state,
            reason=result.reason,
            source_only=result.source_only,
            files=files,
            seconds=time.monotonic() - start,
        )

    def header(self, profile: Profile, cell: Cell, result: CellResult, profile_digest: str) -> str:
        torch = self.options.torch_index or ""
        torch_text = {
            "": f"uv --torch-backend {cell.backend}" if cell.backend else "default index",
            "default": "the default index",
        }.get(torch, redact(torch))
        flag = {"": "", "default": " --torch-index default"}.get(torch, f" --torch-index {torch}")
        index = redact(self.options.index_url) if self.options.index_url else "uv's default index"
        lines = [
            f"envkit lock: profile {profile.name}, cell {cell.name}",
            f"profile-digest: {profile_digest}",
            f"uv: {self.uv_version()}",
            f"index: {index}; torch: {torch_text}",
            f"reproduce: envkit lock {profile.name} --cell {cell.name}{redact(flag)}",
        ]
        if result.state == SOURCE_ONLY:
            lines.append(f"source-only: {', '.join(result.source_only)}")
        return "".join(f"# {line}\n" for line in lines)

    def _write_manifest(
        self, profile: Profile, profile_digest: str, results: list[CellResult]
    ) -> None:
        folder = constraints_root(profile, self.options.root) / profile.name
        if all(r.state == UNREACHABLE for r in results):
            return  # nothing was learnt: lock.json stays as it was
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise FileSystemError(folder, exc, "create") from None
        path = folder / "lock.json"
        previous = read_manifest(path)
        known = previous.get("cells", {}) if previous.get("digest") == profile_digest else {}
        choice = self.options.torch_index or ""
        # where torch came from, so a build from this lock asks the same place (a mirror's
        # URL may hold credentials: it is not written, the build is given it again)
        torch = {"": "backend", "default": "default"}.get(choice, "mirror")
        for r in results:
            if r.state == UNREACHABLE:
                continue  # the previous entry, if any, stands
            entry = {k: v for k, v in r.to_dict().items() if k != "seconds"}
            known[r.cell.name] = {**entry, "torch": torch}
        data = {
            "profile": profile.name,
            "digest": profile_digest,
            "uv": self.uv_version(),
            "cells": dict(sorted(known.items())),
        }
        write_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def read_manifest(path: Path) -> dict[str, Any]:
    """lock.json as written by envkit; {} when missing or not of that shape (every cell is
    then judged from its files alone)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict) or not isinstance(data.get("cells", {}), dict):
        return {}
    cells = {
        str(name): entry
        for name, entry in data.get("cells", {}).items()
        if isinstance(entry, dict)
        and all(isinstance(entry.get(k, ""), str) for k in ("state", "reason", "torch"))
    }
    return {**data, "cells": cells}


def source_only(pylock: Path) -> tuple[str, ...]:
    """Packages the resolution takes as a source distribution only (no wheel for the target)."""
    text = pylock.read_text(encoding="utf-8")
    if len(re.findall(r"^wheels = ", text, re.M)) == text.count("[[packages]]"):
        return ()  # every package has wheels: no need to parse (a tenth of a second a matrix)
    try:
        import tomllib  # 3.11+: six times faster than tomlkit, and this runs once per cell

        doc: dict[str, Any] = tomllib.loads(text)
    except ImportError:  # pragma: no cover - Python 3.10
        doc = tomlkit.parse(text).unwrap()
    return tuple(
        sorted(
            str(p.get("name"))
            for p in doc.get("packages", [])
            if "sdist" in p and not p.get("wheels")
        )
    )


def file_digest(path: Path) -> str:
    """The profile digest a lock file's header names ('' when none)."""
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if not line.startswith("#"):
                    break
                if line.startswith("# profile-digest: "):
                    return line.split(": ", 1)[1].strip()
    except OSError:
        pass
    return ""


def body(path: Path) -> str:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    return "".join(
        lines[next((i for i, ln in enumerate(lines) if not ln.startswith("#")), len(lines)) :]
    )


def _reason(output: str) -> str:
    """uv's explanation as one readable paragraph."""
    # uv draws its error tree with box characters and a multiplication sign
    kept = [ln.strip(" \u2502\u2570\u2500\u25b6\u00d7") for ln in output.splitlines()]
    text = " ".join(ln.strip() for ln in kept if ln.strip() and not ln.startswith("warning"))
    return redact(text[:1200]) or "uv could not resolve this cell"
