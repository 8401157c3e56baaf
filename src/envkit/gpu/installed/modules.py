"""The compiled modules of an environment: every extension module in its site-packages, the
package each belongs to, and what each says of its links (NEEDED, SONAME).

Found by walking site-packages (bounded in files and depth, ``__pycache__`` and metadata
folders skipped); torch's own libraries (``torch/lib``) and NVIDIA's (``nvidia/``) are the
libraries modules link against and are listed apart. A module at the top of site-packages
(flash-attn's ``flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so``) belongs to the
distribution whose RECORD lists it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from envkit.errors import UnreadableFile, WheelError
from envkit.gpu.binaries import elf
from envkit.gpu.binaries.filecache import FileCache
from envkit.gpu.binaries.torchabi import TORCH_LIBRARIES
from envkit.io.files import read_small
from envkit.releases.torchversion import read_version_file

MAX_WALKED = 400_000  # files looked at in one site-packages (a vLLM venv has about 60,000)
MAX_MODULES = 5_000  # compiled modules read
MAX_DEPTH = 12
MAX_RECORD = 16 * 1024**2  # torch's RECORD is about 2 MB
LIBRARY_PACKAGES = ("torch", "nvidia")  # folders of libraries, not of extension modules
MAX_VERSION_FILE = 65_536
# a torch release in a file name: torch-c-dlpack-ext ships libtorch_c_dlpack_addon_torch24
# to ..._torch29 and loads the one of the torch it runs with
_TORCH_TAG = re.compile(r"(?<![0-9a-z])torch([0-9])([0-9]{1,2})(?![0-9])", re.IGNORECASE)


@dataclass(frozen=True)
class Module:
    """One compiled file: where it is, whose it is, and what it links (NEEDED, SONAME)."""

    path: Path
    relative: str  # to site-packages, with '/'
    package: str  # the top-level package (vllm, flash_attn), or the distribution of a file
    links: elf.Links | elf.Unreadable

    @property
    def links_torch(self) -> bool:
        """Whether the module names a torch library (libtorch*, libc10*) in NEEDED."""
        return isinstance(self.links, elf.Links) and any(
            name.startswith(TORCH_LIBRARIES) for name in self.links.needed
        )


@dataclass(frozen=True)
class Walk:
    """What was found, and whether a cap cut the walk short (then it is said, not hidden)."""

    modules: tuple[Module, ...]
    truncated: str = ""  # which cap was reached ('' when none was)


def extension_modules(site_packages: Path, cache: FileCache | None = None) -> Walk:
    """Every ``*.so`` under ``site_packages`` outside torch's and NVIDIA's library folders,
    sorted by path, each with its links (read through ``cache``)."""
    cache = cache or FileCache()
    found: list[Path] = []
    walked, truncated = 0, ""
    # depth first, each folder's subfolders in name order, as os.walk(topdown) with its
    # folders sorted went (os.walk's generators were a fifth of the walk's time here)
    pending = [(str(site_packages), 0)]
    while pending:
        folder, depth = pending.pop()
        folders, others, names = _listing(folder, depth)
        walked += others
        if walked > MAX_WALKED:
            truncated = f"more than {MAX_WALKED} files in site-packages"
            break
        found.extend(Path(folder, n) for n in names)
        if len(found) > MAX_MODULES:
            truncated = f"more than {MAX_MODULES} compiled modules"
            break
        pending.extend((os.path.join(folder, d), depth + 1) for d in reversed(folders))
    found = sorted(p for p in found[:MAX_MODULES] if p.is_file())
    read = [(path, cache.get(path, elf.links)) for path in found]
    # a top-level module's package is its distribution's: looked up in the RECORD files
    # only for the few that link torch or CUDA (the RECORDs of a vLLM venv are 10 MB)
    top = {p.name for p, links in read if p.parent == site_packages and _links_gpu(links)}
    owners = _record_owners(site_packages, top)
    modules = tuple(
        Module(
            path=path,
            relative=path.relative_to(site_packages).as_posix(),
            package=_package(site_packages, path, owners),
            links=links,
        )
        for path, links in read
    )
    return Walk(modules, truncated)


def _listing(folder: str, depth: int) -> tuple[list[str], int, list[str]]:
    """The subfolders of ``folder`` that are walked (not ``__pycache__`` or metadata, not
    torch's or NVIDIA's library folders at the top, none below MAX_DEPTH), sorted; how many
    other entries it has; and the ``*.so`` among them, sorted. A folder that cannot
    be listed is empty, as os.walk skips it; a link to a folder is followed."""
    folders: list[str] = []
    names: list[str] = []
    others = 0
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                name = entry.name
                try:
                    is_folder = entry.is_dir()
                except OSError:
                    is_folder = False
                if not is_folder:
                    others += 1
                    if name.endswith(".so"):
                        names.append(name)
                elif (
                    depth < MAX_DEPTH
                    and name != "__pycache__"
                    and not name.endswith((".dist-info", ".egg-info"))
                    and not (depth == 0 and name in LIBRARY_PACKAGES)
                ):
                    folders.append(name)
    except OSError:
        return [], 0, []
    return sorted(folders), others, sorted(names)


def _links_gpu(links: elf.Links | elf.Unreadable) -> bool:
    return isinstance(links, elf.Links) and any(
        name.startswith((*TORCH_LIBRARIES, "libcu", "libnv")) for name in links.needed
    )


def torch_libraries(site_packages: Path, cache: FileCache | None = None) -> tuple[Module, ...]:
    """torch's own shared libraries (``torch/lib/*.so*``), sorted by name."""
    cache = cache or FileCache()
    folder = site_packages / "torch" / "lib"
    if not folder.is_dir():
        return ()
    return tuple(
        Module(
            path, path.relative_to(site_packages).as_posix(), "torch", cache.get(path, elf.links)
        )
        for path in sorted(folder.iterdir())
        if ".so" in path.name and path.is_file()
    )


def _package(site_packages: Path, path: Path, owners: dict[str, str]) -> str:
    if path.parent != site_packages:
        return path.relative_to(site_packages).parts[0]
    return owners.get(path.name) or path.name.split(".")[0]


def _record_owners(site_packages: Path, names: set[str]) -> dict[str, str]:
    """Which distribution's RECORD lists each top-level file in ``names`` (its name with
    '-' as '_', as the folder is named: flash_attn)."""
    owners: dict[str, str] = {}
    if not names:
        return owners
    for record in sorted(site_packages.glob("*.dist-info/RECORD")):
        try:
            text = read_small(record, MAX_RECORD, what="RECORD").decode("utf-8", "replace")
        except UnreadableFile:
            continue
        distribution = record.parent.name.split("-")[0]
        for line in text.splitlines():
            name = line.split(",", 1)[0]
            if name in names:
                owners.setdefault(name, distribution)
    return owners


@dataclass(frozen=True)
class TorchRelease:
    """The installed torch, as ``torch/version.py`` says it ('' for what it does not)."""

    version: str  # 2.14.0+cu130
    cuda: str  # 13.0

    @property
    def release(self) -> str:
        """major.minor: 2.14."""
        return ".".join(self.version.split("+")[0].split(".")[:2])


def torch_release(site_packages: Path) -> TorchRelease:
    """torch's version and CUDA from ``torch/version.py``'s text (never imported), read by
    the one reader of that file (``releases.torchversion.read_version_file``); '' for each
    when the file is missing, too large or not what torch writes."""
    path = site_packages / "torch" / "version.py"
    try:
        text = read_small(path, MAX_VERSION_FILE, what="torch/version.py")
        found = read_version_file(text.decode("utf-8", "replace"), str(path))
    except (UnreadableFile, WheelError):
        return TorchRelease("", "")
    return TorchRelease(found.version, found.cuda)


def for_other_torch(name: str, installed: TorchRelease) -> str:
    """The torch release a file's name says it is built for ('2.4' for ..._torch24-cpu.so)
    when that is not the installed one; '' otherwise."""
    match = _TORCH_TAG.search(name)
    if not match or not installed.release:
        return ""
    tagged = f"{match.group(1)}.{match.group(2)}"
    return "" if tagged == installed.release else tagged
