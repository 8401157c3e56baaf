"""Locking a profile shipped with envkit: envkit never writes into its own package, so the
profile is first copied into the folder new profiles go to (the user's profile folder on a
fresh account, made when missing), where it hides the shipped one, and that copy is locked
(its locks in ``constraints/`` beside that folder). The shipped locks are copied with it (the
copy has the same digest, so they are as current for it), so a lock that fails or is cut short
leaves the copy no worse off than the shipped profile. Every command then finds the copy and
its locks first."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from envkit.errors import BadInput, FileSystemError
from envkit.io.atomicfile import write_atomic
from envkit.io.files import present, read_small
from envkit.lock.cells import read_lock_bytes
from envkit.lock.place import cell_folder, constraints_root
from envkit.profiles.profile import MAX_PROFILE_BYTES, Profile, load_profile


@dataclass(frozen=True)
class Adopted:
    """The copy of a shipped profile that is locked instead of it."""

    profile: Profile  # the copy
    shipped: Path  # the shipped file it was copied from
    copied: bool  # False: the same copy was there already
    locks: int  # shipped lock files copied with it

    def note(self, locks: Path, doing: str = "locks") -> str:
        done = "copied it to" if self.copied else "its copy is already in"
        published = f", with its {self.locks} published lock files," if self.locks else ""
        return (
            f"{self.profile.name} is shipped with envkit, which does not write into its own "
            f"package: {done} {self.profile.path}{published} and {doing} that copy (locks in "
            f"{locks}); every command now finds that copy first, so `envkit build "
            f"{self.profile.name}` installs these locks"
        )


def adopt(profile: Profile, folder: Path) -> Adopted:
    """``profile`` (a shipped one) copied byte for byte into ``folder``, which is made when
    missing. A copy already there is reused when identical; a different file of that name is
    refused (BadInput), never overwritten."""
    data = read_small(profile.path, MAX_PROFILE_BYTES, what="profile")
    target = folder / f"{profile.name}.toml"
    if present(target):
        if read_small(target, MAX_PROFILE_BYTES, what="profile") != data:
            raise BadInput(
                f"{profile.name} is shipped with envkit ({profile.path}), and {target} is "
                "another profile of that name; envkit does not write into its own package "
                "nor over your file.",
                f"Lock yours (envkit lock {target}), or remove it to lock a fresh copy of the "
                "shipped one.",
            )
        return Adopted(load_profile(target), profile.path, copied=False, locks=0)
    _make(folder)
    # the locks first: a kill between the two leaves no copy without them
    locks = _copy_locks(cell_folder(profile), cell_folder(replace(profile, path=target)))
    write_atomic(target, data)
    return Adopted(load_profile(target), profile.path, copied=True, locks=locks)


def needs_copy(profile: Profile, shipped: bool, option: str | None) -> bool:
    """Whether locking ``profile`` would write into envkit's package: a shipped profile
    (``shipped``, as the catalog says) whose locks go beside it (no --constraints DIR nor
    $ENVKIT_CONSTRAINTS elsewhere)."""
    beside = profile.path.resolve().parent.parent / "constraints"
    return shipped and constraints_root(profile, option).resolve() == beside


def _make(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FileSystemError(folder, exc, "create") from None


def _copy_locks(source: Path, target: Path) -> int:
    """The shipped lock files of ``source`` (lock.json, the cells' constraints and pylocks)
    copied into ``target`` when it holds none yet; the count copied."""
    if present(target / "lock.json") or source.resolve() == target.resolve():
        return 0  # locks of the user's own: left as they are
    files = [
        f
        for f in sorted(source.glob("*"))
        if not f.name.startswith(".")
        and (f.name == "lock.json" or f.suffix in (".txt", ".toml"))
        and present(f)
    ]
    if not files:
        return 0
    _make(target)
    # lock.json last: until it is written, the folder holds no manifest claiming the files
    files.sort(key=lambda f: f.name == "lock.json")
    for f in files:
        write_atomic(target / f.name, read_lock_bytes(f))
    return len(files)
