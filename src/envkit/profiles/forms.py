"""The forms a profile's strings must have (a torch backend, a version, a module name...),
each a linear pattern, the choices or a check, and the words a problem names it by. The
declaration (``keys``) gives each key its form; the reader and the JSON Schema both use it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version


def is_version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def is_timestamp(text: str) -> bool:
    """An RFC 3339 time stamp or a plain date, as uv's --exclude-newer takes them."""
    if not text.isascii() or not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}([Tt ].+)?", text):
        return False
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return False
    return True


def python_specifier(text: str) -> SpecifierSet:
    """``3.12`` means any 3.12.x, ``3.12.1`` exactly that; anything else is a PEP 440 specifier."""
    text = text.strip()
    if not text.isascii():
        raise InvalidSpecifier(f"{text!r} holds characters other than ASCII")
    if re.fullmatch(r"[0-9]+\.[0-9]+", text):
        return SpecifierSet(f"=={text}.*")
    if re.fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", text):
        return SpecifierSet(f"=={text}")
    return SpecifierSet(text)


def _is_python(text: str) -> bool:
    try:
        python_specifier(text)
    except InvalidSpecifier:
        return False
    return True


@dataclass(frozen=True, slots=True)
class Form:
    """The form a string must have: ``pattern`` (ASCII classes only, linear; also the
    schema's), ``choices``, and ``check`` for what a pattern cannot say. ``what`` names it in
    the problem: "'cu1x4' is not a torch backend (...)"."""

    what: str
    pattern: str = ""
    choices: tuple[str, ...] = ()
    check: Callable[[str], bool] | None = None

    def fits(self, text: str) -> bool:
        if self.pattern and not re.fullmatch(self.pattern, text):
            return False
        if self.choices and text not in self.choices:
            return False
        return self.check is None or self.check(text)

    def refusal(self, text: str) -> str:
        if self.choices:
            close = difflib.get_close_matches(text, self.choices, n=1)
            if close:
                return f"unknown {self.what} {text!r}; did you mean '{close[0]}'?"
            return f"unknown {self.what} {text!r} (one of {', '.join(self.choices)})"
        return f"{text!r} is not {self.what}"


# Matrix platform -> uv --python-platform. Linux cells target glibc 2.35 (Ubuntu 22.04):
# the oldest glibc of today's GPU hosts, new enough for the manylinux_2_31 wheels recent
# vLLM releases publish (an older baseline would resolve them to source distributions).
PLATFORMS = {
    "linux-x86_64": "x86_64-manylinux_2_35",
    "linux-aarch64": "aarch64-manylinux_2_35",
    "macos-arm64": "aarch64-apple-darwin",
    "windows-x86_64": "x86_64-pc-windows-msvc",
}
BACKEND = Form(
    "a torch backend (cpu, cu124, rocm6.2, xpu)", r"^(cpu|cu[0-9]{3}|rocm[0-9]+(\.[0-9]+)*|xpu)$"
)
MINOR = Form("a Python version such as '3.12'", r"^[0-9]+\.[0-9]+$")
CUDA = Form("a CUDA version such as '12.4'", r"^[0-9]+\.[0-9]+$")
MODULE = Form("a module name", r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
ATTRIBUTE = Form("module.attribute", r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
# Versions end up in image tags, URLs and commands, so they are ASCII and PEP 440.
VERSION = Form("a version such as '0.8.5'", r"^[vV]?[0-9][0-9A-Za-z.!+_-]*$", check=is_version)
PYTHON = Form("a Python version ('3.12') or specifier", r"^[ -~]+$", check=_is_python)
TIMESTAMP = Form(
    "a date or time stamp such as '2025-05-20' or '2025-05-20T00:00:00Z'",
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}([Tt ].+)?$",
    check=is_timestamp,
)
PLATFORM = Form("platform", choices=tuple(PLATFORMS))
HF_ONLY = Form('a bound direction ("min", "max" or "min,max")', choices=("min", "max", "min,max"))
