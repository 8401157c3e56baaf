"""The compiled modules of an environment: every extension module in its site-packages, the
package each belongs to, and what each says of its links (NEEDED, undefined symbols).

Found by walking site-packages (bounded in files and depth, ``__pycache__`` and metadata
folders skipped); torch's own libraries (``torch/lib``) and NVIDIA's (``nvidia/``) are the
libraries modules link against and are listed apart. A module at the top of site-packages
(flash-attn's ``flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so``) belongs to the
distribution whose RECORD lists it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from envkit.gpu import elf

MAX_WALKED = 400_000  # files looked at in one site-packages (a vLLM venv has about 60,000)
MAX_MODULES = 5_000  # compiled modules read
MAX_DEPTH = 12
MAX_RECORD = 16 * 1024**2  # torch's RECORD is about 2 MB
TORCH_LIBRARIES = ("libtorch", "libc10")  # NEEDED entries that make a module link torch
LIBRARY_PACKAGES = ("torch", "nvidia")  # folders of libraries, not of extension modules


@dataclass(frozen=True)
class Module:
    """One compiled file: where it is, whose it is, and what its dynamic section says."""

    path: Path
    relative: str  # to site-packages, with '/'
    package: str  # the top-level package (vllm, flash_attn), or the distribution of a file
    dynamic: elf.Dynamic | elf.Unreadable

    @property
    def links_torch(self) -> bool:
        """Whether the module names a torch library (libtorch*, libc10*) in NEEDED."""
        return isinstance(self.dynamic, elf.Dynamic) and any(
            name.startswith(TORCH_LIBRARIES) for name in self.dynamic.needed
        )


@dataclass(frozen=True)
class Walk:
    """What was found, and whether a cap cut the walk short (then it is said, not hidden)."""

    modules: tuple[Module, ...]
    truncated: str = ""  # which cap was reached ('' when none was)


def extension_modules(site_packages: Path, cache: elf.FileCache | None = None) -> Walk:
    """Every ``*.so`` under ``site_packages`` outside torch's and NVIDIA's library folders,
    sorted by path, each with its dynamic facts (read through ``cache``)."""
    cache = cache or elf.FileCache()
    found: list[Path] = []
    walked, truncated = 0, ""
    root_depth = len(site_packages.parts)
    for folder, dirs, files in os.walk(site_packages):
        here = Path(folder)
        depth = len(here.parts) - root_depth
        dirs[:] = sorted(
            d
            for d in dirs
            if d != "__pycache__"
            and not d.endswith((".dist-info", ".egg-info"))
            and not (depth == 0 and d in LIBRARY_PACKAGES)
            and depth < MAX_DEPTH
        )
        walked += len(files)
        if walked > MAX_WALKED:
            truncated = f"more than {MAX_WALKED} files in site-packages"
            break
        found.extend(here / name for name in sorted(files) if name.endswith(".so"))
        if len(found) > MAX_MODULES:
            truncated = f"more than {MAX_MODULES} compiled modules"
            break
    found = sorted(found)[:MAX_MODULES]
    owners = _record_owners(site_packages, {p.name for p in found if p.parent == site_packages})
    modules = tuple(
        Module(
            path=path,
            relative=path.relative_to(site_packages).as_posix(),
            package=_package(site_packages, path, owners),
            dynamic=cache.get(path, elf.dynamic),
        )
        for path in found
        if path.is_file()
    )
    return Walk(modules, truncated)


def torch_libraries(site_packages: Path, cache: elf.FileCache | None = None) -> tuple[Module, ...]:
    """torch's own shared libraries (``torch/lib/*.so*``), sorted by name."""
    cache = cache or elf.FileCache()
    folder = site_packages / "torch" / "lib"
    if not folder.is_dir():
        return ()
    return tuple(
        Module(
            path, path.relative_to(site_packages).as_posix(), "torch", cache.get(path, elf.dynamic)
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
            if record.stat().st_size > MAX_RECORD:
                continue
            text = record.read_text("utf-8", "replace")
        except OSError:
            continue
        distribution = record.parent.name.split("-")[0]
        for line in text.splitlines():
            name = line.split(",", 1)[0]
            if name in names:
                owners.setdefault(name, distribution)
    return owners
