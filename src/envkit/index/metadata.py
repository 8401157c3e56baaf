"""A distribution's core metadata, its ``METADATA`` file: the one reader of that file kind,
for a wheel read by range (``releases.registry``, ``compat``, ``gpu.published``) and for an
installed ``*.dist-info`` (``serving.explain.envpins``, ``fleet.records``).

The format is RFC 822 headers, read with ``email.parser`` as the core metadata
specification defines them; the body (a long description) is never read: only the first
:data:`MAX_HEADERS` bytes are, and the headers stop at the first blank line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envkit.io.files import open_regular

MAX_HEADERS = 64 * 1024  # vLLM's headers are ~5 KiB; a description can be megabytes


@dataclass(frozen=True, slots=True)
class Metadata:
    """The headers envkit reads ('' or () for those a file lacks)."""

    name: str
    version: str
    requires_dist: tuple[str, ...]
    requires_python: str


def parse(text: str) -> Metadata:
    """The headers of a ``METADATA`` text (of which the first MAX_HEADERS characters)."""
    from email.parser import Parser  # the email package: by the commands that read one

    head, _, _body = text[:MAX_HEADERS].replace("\r\n", "\n").partition("\n\n")
    message = Parser().parsestr(head, headersonly=True)
    return Metadata(
        name=str(message.get("Name") or "").strip(),
        version=str(message.get("Version") or "").strip(),
        requires_dist=tuple(str(v) for v in message.get_all("Requires-Dist") or ()),
        requires_python=str(message.get("Requires-Python") or "").strip(),
    )


def read_installed(path: Path) -> Metadata:
    """The headers of an installed distribution's ``METADATA`` at ``path`` (a regular file:
    ``io.files``). Raises UnreadableFile when it is not one."""
    with open_regular(path, what="METADATA") as handle:
        head = handle.read(MAX_HEADERS)
    return parse(head.decode("utf-8", "replace"))
