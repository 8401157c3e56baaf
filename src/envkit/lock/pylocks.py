"""PEP 751 lock files (``pylock.*.toml``) as envkit publishes them.

uv writes the resolution; envkit adds what makes a lock refuse the wrong machine up front,
``environments`` (the cell's platform as a marker) and an exact ``requires-python`` (the
cell's Python), and validates every pylock with ``packaging.pylock`` before it is written
or published: a Python 3.11 or aarch64 lock handed to another machine is then refused by uv
and by packaging's ``Pylock.select`` instead of failing late on some wheel.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import tomlkit
from packaging.pylock import Pylock, PylockValidationError
from packaging.utils import canonicalize_name

from envkit.errors import WheelError
from envkit.io.redaction import redact
from envkit.lock.cells import Cell, read_lock

# Matrix platform -> the PEP 508 marker a machine of that platform satisfies.
PLATFORM_MARKERS = {
    "linux-x86_64": "sys_platform == 'linux' and platform_machine == 'x86_64'",
    "linux-aarch64": "sys_platform == 'linux' and platform_machine == 'aarch64'",
    "macos-arm64": "sys_platform == 'darwin' and platform_machine == 'arm64'",
    "windows-x86_64": "sys_platform == 'win32' and platform_machine == 'AMD64'",
}
_REQUIRES_PYTHON = re.compile(r"^requires-python = .*\n", re.M)
_LOCK_VERSION = re.compile(r"^lock-version = .*\n", re.M)


def for_cell(text: str, cell: Cell) -> str:
    """uv's pylock ``text`` with the cell's ``environments`` and ``requires-python``."""
    marker = PLATFORM_MARKERS[cell.platform]
    head = f'environments = ["{marker}"]\nrequires-python = "=={cell.python}.*"\n'
    text = _REQUIRES_PYTHON.sub("", text, count=1)
    found = _LOCK_VERSION.search(text)
    if found is None:
        raise WheelError("uv wrote a pylock without lock-version; envkit cannot publish it.")
    return text[: found.end()] + head + text[found.end() :]


def redacted(text: str) -> str:
    """uv's pylock ``text`` with every string value through ``redact`` (a URL's userinfo,
    a token in its query), as values of the TOML document and then written by tomlkit:
    masking the text itself could break its quoting. The text as it is when nothing in it
    would be masked (the usual case: uv keeps index credentials out of it)."""
    if redact(text) == text:  # a check only; the text is never rewritten as text
        return text
    try:
        doc = tomlkit.parse(text)
    except ValueError as exc:  # tomlkit's ParseError is one
        raise WheelError(f"uv wrote a pylock that is not TOML: {exc}.") from None
    _redact_strings(doc)
    return tomlkit.dumps(doc)


def _redact_strings(node: object) -> None:
    if isinstance(node, dict):
        places: list[Any] = list(node)
    elif isinstance(node, list):
        places = list(range(len(node)))
    else:
        return
    for place in places:
        value = node[place]
        if isinstance(value, str):
            shown = redact(value)
            if shown != value:
                node[place] = shown
        else:
            _redact_strings(value)


def load(text: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib  # several times faster than tomlkit, and this runs per cell

        return tomllib.loads(text)
    unwrapped: dict[str, Any] = tomlkit.parse(text).unwrap()  # Python 3.10 has no tomllib
    return unwrapped


def validate(text: str, where: str) -> Pylock:
    """The lock as packaging reads it; WheelError naming the key when it is not valid."""
    try:
        return Pylock.from_dict(load(text))
    except PylockValidationError as exc:
        raise WheelError(
            f"{where} is not a valid PEP 751 lock: {exc}.",
            "Lock the cell again (envkit lock PROFILE --cell CELL); report it if it persists.",
        ) from None
    except ValueError as exc:  # not TOML at all
        raise WheelError(f"{where} is not TOML: {exc}.") from None


def validate_file(path: Path) -> Pylock:
    return validate(read_lock(path), str(path))


def torch_wheel(pylock: Path) -> tuple[str, str, str] | None:
    """torch's version, and the URL and sha256 of its (first) wheel in a cell's pylock."""
    for package in load(read_lock(pylock)).get("packages", []):
        if not isinstance(package, dict) or package.get("name") != "torch":
            continue
        wheels = package.get("wheels")
        if isinstance(wheels, list) and wheels and isinstance(wheels[0], dict):
            wheel: dict[str, Any] = wheels[0]
            hashes = wheel.get("hashes")
            hashes = hashes if isinstance(hashes, dict) else {}
            return (
                str(package.get("version", "")),
                str(wheel.get("url", "")),
                str(hashes.get("sha256", "")),
            )
    return None


@dataclass(frozen=True)
class LockedWheel:
    """One package of a cell's pylock with the wheel it installs (its first, the target's)."""

    name: str
    version: str
    url: str
    sha256: str

    @property
    def filename(self) -> str:
        return unquote(urlsplit(self.url).path.rsplit("/", 1)[-1])


def versions(pylock: Path) -> dict[str, str]:
    """Every package of a cell's pylock: canonical name -> version."""
    return {
        canonicalize_name(str(p["name"])): str(p.get("version", ""))
        for p in load(read_lock(pylock)).get("packages", [])
        if isinstance(p, dict) and isinstance(p.get("name"), str)
    }


def wheels(pylock: Path) -> tuple[LockedWheel, ...]:
    """The packages of a cell's pylock that install a wheel, each with its first wheel."""
    found = []
    for package in load(read_lock(pylock)).get("packages", []):
        if not isinstance(package, dict) or not isinstance(package.get("name"), str):
            continue
        listed = package.get("wheels")
        if not (isinstance(listed, list) and listed and isinstance(listed[0], dict)):
            continue
        hashes = listed[0].get("hashes")
        found.append(
            LockedWheel(
                name=canonicalize_name(package["name"]),
                version=str(package.get("version", "")),
                url=str(listed[0].get("url", "")),
                sha256=str(hashes.get("sha256", "")) if isinstance(hashes, dict) else "",
            )
        )
    return tuple(found)


def source_only(pylock: Path) -> tuple[str, ...]:
    """Packages the resolution takes as a source distribution only (no wheel for the target)."""
    text = read_lock(pylock)
    if len(re.findall(r"^wheels = ", text, re.M)) == text.count("[[packages]]"):
        return ()  # every package has wheels: no need to parse (a tenth of a second a matrix)
    doc = load(text)
    return tuple(
        sorted(
            str(p.get("name"))
            for p in doc.get("packages", [])
            if "sdist" in p and not p.get("wheels")
        )
    )
