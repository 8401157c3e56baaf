"""The vLLM, transformers and torch an environment holds, for ``explain --venv/--profile``:
read from the venv's ``*.dist-info/METADATA`` files (the interpreter is never run, so a venv
whose vLLM cannot even import is read all the same), or from a profile's pins.

A distribution is known by the folder its ``dist-info`` really is: uv's ``lib64 -> lib`` link
(and any other second path to one site-packages) shows one install twice, which is one install,
not a mixed one."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envkit.errors import BadInput, UnreadableFile
from envkit.index.metadata import read_installed

if TYPE_CHECKING:
    from envkit.profiles.profile import Profile

WANTED = ("vllm", "transformers", "torch")
MAX_DIST_INFOS = 5000


@dataclass(frozen=True)
class Installed:
    """Versions by package; ``source`` says where they came from (``venv PATH``)."""

    source: str
    versions: dict[str, str]
    copies: dict[str, tuple[str, ...]]  # a package installed more than once: every version

    def get(self, name: str) -> str:
        return self.versions.get(name, "")


def _canonical(name: str) -> str:
    """A distribution's name as PEP 503 normalises it (packaging's ``canonicalize_name``,
    whose module loads packaging's platform tags: not worth it for three names)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _identity(path: Path) -> tuple[int, int] | str:
    """What ``path`` really is: its device and inode, else its resolved path."""
    try:
        st = path.stat()
    except OSError:
        return str(path.resolve())
    return (st.st_dev, st.st_ino)


def _site_packages(venv: Path) -> list[Path]:
    """Each site-packages of ``venv`` once, however many paths lead to it."""
    found = sorted(venv.glob("lib/python3*/site-packages")) + sorted(
        venv.glob("lib64/python3*/site-packages")
    )
    windows = venv / "Lib" / "site-packages"
    if windows.is_dir():
        found.append(windows)
    seen: set[tuple[int, int] | str] = set()
    out = []
    for folder in found:
        if (key := _identity(folder)) not in seen:
            seen.add(key)
            out.append(folder)
    return out


def _headers(metadata: Path) -> tuple[str, str]:
    """Name and Version of an installed METADATA (``index.metadata``); '' for a file that
    is not a regular one."""
    try:
        found = read_installed(metadata)
    except UnreadableFile:
        return "", ""
    return found.name, found.version


def from_venv(venv: Path) -> Installed:
    """The versions installed in ``venv``. Raises BadInput when it holds no site-packages."""
    folders = _site_packages(venv)
    if not folders:
        raise BadInput(
            f"{str(venv)!r} is not a virtual environment: no lib/python3*/site-packages in it.",
            "Give --venv the folder `uv venv` or `python -m venv` made (it holds pyvenv.cfg).",
        )
    seen: dict[str, list[str]] = {}
    infos: set[tuple[int, int] | str] = set()  # each dist-info once, by what it really is
    count = 0
    for folder in folders:
        for info in sorted(folder.glob("*.dist-info")):
            count += 1
            if count > MAX_DIST_INFOS:
                break
            stem = _canonical(info.name.split("-", 1)[0])
            if stem not in WANTED or not (info / "METADATA").is_file():
                continue
            if (key := _identity(info)) in infos:
                continue
            infos.add(key)
            name, version = _headers(info / "METADATA")
            if _canonical(name or stem) in WANTED and version:
                seen.setdefault(_canonical(name or stem), []).append(version)
    return Installed(
        source=f"venv {venv}",
        versions={k: v[0] for k, v in seen.items()},
        copies={k: tuple(v) for k, v in seen.items() if len(v) > 1},
    )


def from_profile(profile: Profile) -> Installed:
    pins = profile.expected_versions()
    return Installed(
        source=f"profile {profile.name}",
        versions={k: pins[k] for k in WANTED if k in pins},
        copies={},
    )
