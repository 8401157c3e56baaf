"""URLs envkit is given: package indexes, the torch source, servers. Checked where they enter.

A URL holding whitespace or a character that is not printable (a newline, ESC, U+202E, ...)
is refused, naming the option or variable it came from: envkit writes index URLs into lock
headers and prints them, where such a character would start a line of its own (a
requirement in a constraints file) or act on the terminal.

Kept apart from the HTTP client (io/http.py) so that commands which only validate a URL
(build, lock) do not load an HTTP stack.
"""

from __future__ import annotations

import base64
import hashlib
import os
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

from envkit.errors import BadInput
from envkit.io.escaping import escape, unsafe_character, visible
from envkit.io.redaction import redact

DEFAULT_INDEX = "https://pypi.org/simple"
_DEFAULT_PORTS = {"http": 80, "https": 443}
_EXAMPLE = "Give a URL such as https://host/simple or http://127.0.0.1:8000/v1."


@dataclass(frozen=True)
class Target:
    """A URL split into where it goes and the credentials it carried."""

    url: str  # without userinfo
    origin: tuple[str, str, int]
    authorization: str  # from the userinfo; '' when none


def refuse_unsafe(text: str, where: str, what: str = "URL", *, spaces: bool = False) -> None:
    """BadInput naming ``where`` when ``text`` (its ends stripped) holds whitespace (but the
    plain spaces a folder path may hold, with ``spaces``) or a character that is not
    printable."""
    value = text.strip()
    char = unsafe_character(value.replace(" ", "") if spaces else value)
    if char is None:
        return
    kind = "a space" if char == " " else f"the character {escape(char)}"
    prefix = f"{where}: " if where else ""
    shown = visible(redact(value, one_line=True))  # masked as a value, then escaped
    raise BadInput(
        f"{prefix}the {what} '{shown}' holds {kind}, which no {what} may "
        "hold: written into a lock header or printed, it could start a line of its own or act "
        "on the terminal.",
        "Percent-encode it (a space is %20), or give the URL without it.",
    )


def parse_url(url: str, where: str = "") -> Target:
    """Split credentials off ``url``; BadInput (naming ``where``, the option or variable, when
    given) when it is not an http(s) URL envkit can use or holds whitespace or a control."""
    refuse_unsafe(url, where)
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise BadInput(
            f"{redact(url)!r} is not a valid URL (bad host or port).",
            _EXAMPLE,
        ) from None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        raise BadInput(
            f"{redact(url)!r} is not an http(s) URL.",
            _EXAMPLE,
        )
    netloc = parts.netloc.rpartition("@")[2]
    authorization = ""
    if "@" in parts.netloc:
        userinfo = parts.netloc.rpartition("@")[0]
        user, _sep, password = userinfo.partition(":")
        authorization = basic_authorization(unquote(user), unquote(password))
    return Target(
        url=urlunsplit((scheme, netloc, parts.path or "/", parts.query, "")),
        origin=(scheme, host, port or _DEFAULT_PORTS[scheme]),
        authorization=authorization,
    )


def basic_authorization(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def check_index(text: str, where: str) -> str:
    """A package index as uv takes it: an http(s) URL, a file:// URL or an existing folder.
    ``where`` names the option or variable, for the message. Returns it without a final '/'."""
    value = text.strip()
    if value and os.path.isdir(value):
        refuse_unsafe(value, where, "folder path", spaces=True)
        return value.rstrip("/")
    refuse_unsafe(value, where)
    if value.lower().startswith("file://"):
        return value.rstrip("/")
    try:
        parse_url(value)
    except BadInput as exc:
        raise BadInput(
            f"{where}: {redact(text)!r} is not a package index URL ({exc.message.rstrip('.')}).",
            "Give an http(s) URL such as https://host/simple, a file:// URL or a folder.",
        ) from None
    return value.rstrip("/")


def index_url(option: str | None = None) -> str:
    """The index, as uv picks its default one: the option, ``$UV_DEFAULT_INDEX``,
    ``$UV_INDEX_URL`` (uv's older name), else PyPI; checked (:func:`check_index`)."""
    for value, where in (
        (option, "--index-url"),
        (os.environ.get("UV_DEFAULT_INDEX"), "UV_DEFAULT_INDEX"),
        (os.environ.get("UV_INDEX_URL"), "UV_INDEX_URL"),
    ):
        if value and value.strip():
            return check_index(value, where)
    return DEFAULT_INDEX


def index_key(index: str) -> str:
    """The cache key of an index: its URL without credentials (another index, another key)."""
    return hashlib.sha256(parse_url(index).url.rstrip("/").encode()).hexdigest()[:12]


def check_torch_index(text: str | None, where: str = "--torch-index") -> str | None:
    """``default``, a PyTorch index mirror URL (``{backend}`` is substituted), or None."""
    if text is None or not text.strip():
        return None
    value = text.strip()
    if value == "default":
        return value
    refuse_unsafe(value, where)
    try:
        check_index(value.replace("{backend}", "cpu"), where)
    except BadInput:
        raise BadInput(
            f"{where} {redact(text)!r} is neither 'default' nor a URL.",
            "Pass --torch-index default, or the URL of a PyTorch index mirror "
            "(a '{backend}' in it is replaced by the backend, e.g. .../whl/{backend}).",
        ) from None
    return value
