"""The state of published locks: which cells are current, stale, missing; and publishing them.

A cell is stale when its files name another profile digest than the profile has now (the
profile was edited since), or, with ``resolve``, when resolving it again gives another body
(the index changed under an unpinned dependency). ``constraints/index.json`` lists every
published file with its sha256 and the NVIDIA driver its cell needs, for people who fetch
the files without envkit.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from envkit.errors import BadInput, EnvkitError, FileSystemError, StaleLocks, UnreadableFile
from envkit.io import faults
from envkit.io.atomicfile import temporary_folder, write_atomic
from envkit.io.escaping import shell_command
from envkit.io.files import MiB, open_regular, read_small_text
from envkit.lock import pylocks
from envkit.lock.cells import (
    CellState,
    CellStatus,
    Manifest,
    TorchOrigin,
    body,
    cells,
    digest,
    driver_dict,
    file_digest,
    held_aside,
    read_lock,
    read_lock_bytes,
)
from envkit.lock.locker import Locker
from envkit.lock.place import cell_folder, constraints_root
from envkit.lock.torchsource import TorchIndex
from envkit.profiles.profile import Profile

MAX_INDEX_BYTES = 16 * MiB  # constraints/index.json: a line per published file


def states(
    profile: Profile, root: str | None = None, *, current: str | None = None
) -> list[CellState]:
    """Every cell of ``profile`` with its status, from the files on disk and lock.json.
    ``current``: the profile's digest when the caller has read it already."""
    folder = cell_folder(profile, root)
    current = current or digest(profile)
    manifest = Manifest.read(folder / "lock.json")
    recorded = manifest.cells if manifest is not None and manifest.digest == current else {}
    out = []
    for cell in cells(profile):
        txt, pylock = folder / cell.txt_name, folder / cell.pylock_name
        entry = recorded.get(cell.name)
        if entry is not None and entry.state in (CellStatus.UNRESOLVABLE, CellStatus.INCOMPATIBLE):
            out.append(CellState(cell=cell, status=entry.state, reason=entry.reason))
        elif not txt.is_file() or not pylock.is_file():
            out.append(
                CellState(
                    cell=cell,
                    status=CellStatus.MISSING,
                    reason="not locked: "
                    + shell_command(["envkit", "lock", profile.name, "--cell", cell.name]),
                )
            )
        elif file_digest(txt) != current or file_digest(pylock) != current:
            out.append(
                CellState(
                    cell=cell,
                    status=CellStatus.STALE,
                    files=(txt, pylock),
                    reason=f"the profile changed since the lock: envkit lock "
                    f"{profile.name} --cell {cell.name}",
                )
            )
        else:
            source_only = entry is not None and entry.state is CellStatus.SOURCE_ONLY
            out.append(
                CellState(
                    cell=cell,
                    status=CellStatus.SOURCE_ONLY if source_only else CellStatus.LOCKED,
                    reason=entry.reason if entry else "",
                    source_only=entry.source_only if entry else (),
                    files=(txt, pylock),
                    torch=entry.torch if entry else TorchOrigin.BACKEND,
                )
            )
    return out


def check(profiles: Iterable[Profile], root: str | None, locker: Locker | None) -> list[CellState]:
    """Every cell's state; with a ``locker``, locked cells are also resolved again."""
    found: list[CellState] = []
    for profile in profiles:
        for state in states(profile, root):
            if locker is not None and state.status.usable:
                state = _re_resolved(profile, state, locker)
            found.append(state)
    return found


def _re_resolved(profile: Profile, state: CellState, locker: Locker) -> CellState:
    """Resolve a published cell again, with torch from where its lock took it: a cell locked
    from the default index is checked against the default index, whatever --torch-index."""
    torch = TorchIndex(state.torch)
    if state.torch is TorchOrigin.MIRROR:
        torch = locker.options.torch_index
        if torch.origin is not TorchOrigin.MIRROR:
            raise BadInput(
                f"{profile.name} / {state.cell.name} was locked from a PyTorch index mirror, "
                "whose URL is not recorded.",
                "Pass it with --torch-index URL to check this cell.",
            )
    out_of_reach = locker.reach(state.cell.backend, torch)
    if out_of_reach is not None:
        raise out_of_reach  # the cache must not answer for an index that is gone
    with temporary_folder("check") as tmp:
        again = locker.resolve(profile, state.cell, Path(tmp), torch, published=state.files)
        if again.status in (CellStatus.UNRESOLVABLE, CellStatus.INCOMPATIBLE):
            said = "no longer resolves" if again.status is CellStatus.UNRESOLVABLE else "refused"
            return CellState(
                cell=state.cell,
                status=CellStatus.STALE,
                files=state.files,
                reason=f"{said}: {again.reason}",
            )
        if read_lock(Path(tmp) / "cell.txt") != body(state.files[0]):
            return CellState(
                cell=state.cell,
                status=CellStatus.STALE,
                files=state.files,
                reason="resolving again gives another result: envkit lock "
                f"{profile.name} --cell {state.cell.name}",
            )
    return state


def publish(profiles: Iterable[Profile], root: str | None, to: Path | None) -> dict[str, Any]:
    """Write ``index.json`` (and, with ``to``, copies of every locked file) atomically.

    index.json is read, merged and written under its file lock, so publishers running at
    once each keep the others' profiles. With ``to``, every file it would write is checked
    before the first is written (:func:`_check_destination`). Raises StaleLocks for cells
    that are not current, BadInput for a destination it must not write over."""
    published = list(profiles)
    entries, sources, source_roots = _published_files(published, root)
    if len(source_roots) > 1 and to is None:
        raise EnvkitError(
            "The profiles' constraints live in different folders.",
            "Publish them one folder at a time, or pass --to DIR.",
        )
    target = to or next(iter(source_roots), Path("constraints"))
    if to is not None:  # checked before anything is made there (the lock file included)
        if _exists(target) and not target.is_dir():
            raise BadInput(f"--to {str(target)!r} is a file, not a folder.", "Give a folder.")
        _index_entries(target / "index.json")
        _check_destination(target, entries)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FileSystemError(target, exc, "create") from None
    # One publisher at a time reads, merges and writes index.json: four at once would
    # otherwise each write back what they read, and all but one lose their profiles.
    with held_aside(target / "index.json"):
        previous = _index_entries(target / "index.json")
        faults.fault_point("index-read")
        copies = list(zip(entries, sources, strict=True)) if to is not None else []
        if copies:  # again, now that no other publisher can change it
            _check_destination(target, entries)
        for entry, source in copies:
            dest = target / entry["file"]
            try:
                dest.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise FileSystemError(dest.parent, exc, "create") from None
            write_atomic(dest, read_lock_bytes(source))
        # the profiles published now replace their own entries; every other profile's stay
        names = {entry["profile"] for entry in entries} | {p.name for p in published}
        kept = [e for e in previous if e["profile"] not in names]
        index = {
            "format": 1,
            "files": sorted([*kept, *entries], key=lambda e: (e["profile"], e["file"])),
        }
        write_atomic(target / "index.json", json.dumps(index, indent=2, sort_keys=True) + "\n")
    return {"ok": True, "to": str(target), "files": index["files"]}


def _published_files(
    published: list[Profile], root: str | None
) -> tuple[list[dict[str, Any]], list[Path], set[Path]]:
    """index.json's entries for every usable cell, the files they name, and the folders
    those live in; StaleLocks naming every cell that is stale or missing."""
    entries: list[dict[str, Any]] = []
    sources: list[Path] = []
    stale: list[str] = []
    source_roots: set[Path] = set()
    for profile in published:
        source_roots.add(constraints_root(profile, root))
        current = digest(profile)
        for state in states(profile, root, current=current):
            if state.status in (CellStatus.STALE, CellStatus.MISSING):
                stale.append(f"{profile.name}/{state.cell.name} ({state.state})")
                continue
            for path in state.files:
                if path.suffix == ".toml":
                    pylocks.validate_file(path)  # never publish a pylock packaging refuses
                sources.append(path)
                entries.append(
                    {
                        "profile": profile.name,
                        "cell": state.cell.name,
                        "state": state.state,
                        "file": f"{profile.name}/{path.name}",
                        "sha256": hashlib.sha256(read_lock_bytes(path)).hexdigest(),
                        "digest": current,
                        "driver": driver_dict(state.cell.backend),
                    }
                )
    if stale:
        raise StaleLocks(
            "Refusing to publish stale or missing cells: " + ", ".join(stale) + ".",
            "Lock them first: envkit lock --all (add --torch-index default where the PyTorch "
            "index is out of reach).",
        )
    return entries, sources, source_roots


def _exists(path: Path) -> bool:
    return os.path.lexists(path)


def _check_destination(target: Path, entries: list[dict[str, Any]]) -> None:
    """Every file ``publish --to`` would write, checked before any is written: each must
    be missing or a lock file envkit wrote for that profile and cell, inside ``target``
    (no symlink leading out of it, no folder or other file in the way). BadInput naming
    the first one that is not, and what to do; nothing is then written."""
    root = Path(os.path.realpath(target))
    paths = [target / "index.json", *(target / e["file"] for e in entries)]
    for path in paths:
        if not Path(os.path.realpath(path)).is_relative_to(root):
            raise BadInput(
                f"{str(path)!r} leads out of --to {str(target)!r} (a symlink); nothing was "
                "published.",
                "Remove the link, or publish into another folder.",
            )
        if path.parent != target and _exists(path.parent) and not path.parent.is_dir():
            raise BadInput(
                f"{str(path.parent)!r} is a file where publish writes a folder; nothing "
                "was published.",
                "Move it away, or publish into another folder.",
            )
    for entry, path in zip(entries, paths[1:], strict=True):
        if not _exists(path):
            continue
        mine = f"# envkit lock: profile {entry['profile']}, cell {entry['cell']}\n"
        try:
            ours = path.is_file() and not path.is_symlink() and _first_line(path) == mine
        except (OSError, UnreadableFile):
            ours = False
        if not ours:
            raise BadInput(
                f"{str(path)!r} is not a lock file envkit wrote for {entry['profile']} / "
                f"{entry['cell']}; publish --to will not write over it, and nothing was "
                "published.",
                "Move it away (or publish into another folder), then publish again.",
            )


def _first_line(path: Path) -> str:
    with open_regular(path, what="lock file") as handle:
        return handle.readline(512).decode("utf-8", "replace")


def _index_entries(path: Path) -> list[dict[str, Any]]:
    """The entries of an existing index.json; BadInput when it exists but is not one."""
    try:
        text = read_small_text(path, MAX_INDEX_BYTES, what="index.json")
    except UnreadableFile as exc:
        if exc.kind == "missing":
            return []
        raise
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        data = None
    files = data.get("files") if isinstance(data, dict) else None
    keys = ("profile", "cell", "state", "file", "sha256", "digest")
    if not isinstance(files, list) or not all(
        isinstance(e, dict) and all(isinstance(e.get(k), str) for k in keys) for e in files
    ):
        raise BadInput(
            f"{str(path)!r} is not an index.json written by envkit publish.",
            "Move it away (or restore it from version control), then publish again.",
        )
    # the driver from the cell's backend (its name's last part), as envkit states it now
    return [
        {**{k: e[k] for k in keys}, "driver": driver_dict(e["cell"].rsplit("-", 1)[-1])}
        for e in files
    ]


# Matrix platform -> the GitHub-hosted runner that is that platform, so a cell is built and
# verified on a machine it is for.
RUNNERS = {
    "linux-x86_64": "ubuntu-latest",
    "linux-aarch64": "ubuntu-24.04-arm",
    "macos-arm64": "macos-latest",
    "windows-x86_64": "windows-latest",
}
GITHUB_MATRIX_LIMIT = 256  # jobs one strategy.matrix may generate


def github_matrix(found: Iterable[CellState]) -> dict[str, Any]:
    """``{"include": [...]}`` for GitHub Actions: per cell its axes, state, runner and the
    ``--torch-index`` its lock was made with. BadInput past GitHub's 256-job limit."""
    include = []
    for state in found:
        torch = {TorchOrigin.DEFAULT: "default", TorchOrigin.MIRROR: "mirror"}.get(state.torch, "")
        include.append(
            {
                **state.cell.to_dict(),
                "state": state.state,
                "runner": RUNNERS[state.cell.platform],
                "torch_index": torch,
            }
        )
    if len(include) > GITHUB_MATRIX_LIMIT:
        raise BadInput(
            f"The lock matrix has {len(include)} cells; one GitHub Actions matrix runs at most "
            f"{GITHUB_MATRIX_LIMIT} jobs.",
            "Split it: run `envkit matrix PROFILE --github` per profile in separate jobs.",
        )
    return {"include": include}
