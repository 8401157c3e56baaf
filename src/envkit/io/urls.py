"""URLs envkit is given: package indexes, the torch source, servers. Checked where they enter.

Kept apart from the HTTP client (httpclient.py) so that commands which only validate a URL
(build, lock) do not load an HTTP stack.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit, urlunsplit

from envkit.errors import BadInput
from envkit.io.redaction import redact

_DEFAULT_PORTS = {"http": 80, "https": 443}
_EXAMPLE = "Give a URL such as https://host/simple or http://127.0.0.1:8000/v1."


@dataclass(frozen=True)
class Target:
    """A URL split into where it goes and the credentials it carried."""

    url: str  # without userinfo
    origin: tuple[str, str, int]
    authorization: str  # from the userinfo; '' when none


def parse_url(url: str) -> Target:
    """Split credentials off ``url``; BadInput when it is not an http(s) URL envkit can use."""
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
    if value.lower().startswith("file://") or (value and os.path.isdir(value)):
        return value.rstrip("/")
    try:
        parse_url(value)
    except BadInput as exc:
        raise BadInput(
            f"{where}: {redact(text)!r} is not a package index URL ({exc.message.rstrip('.')}).",
            "Give an http(s) URL such as https://host/simple, a file:// URL or a folder.",
        ) from None
    return value.rstrip("/")


def check_torch_index(text: str | None, where: str = "--torch-index") -> str | None:
    """``default``, a PyTorch index mirror URL (``{backend}`` is substituted), or None."""
    if text is None or not text.strip():
        return None
    value = text.strip()
    if value == "default":
        return value
    try:
        check_index(value.replace("{backend}", "cpu"), where)
    except BadInput:
        raise BadInput(
            f"{where} {redact(text)!r} is neither 'default' nor a URL.",
            "Pass --torch-index default, or the URL of a PyTorch index mirror "
            "(a '{backend}' in it is replaced by the backend, e.g. .../whl/{backend}).",
        ) from None
    return value
