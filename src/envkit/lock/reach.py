"""Whether an index a lock names answers, asked before uv is: uv's cache could otherwise
answer for an index that is gone, and the lock would then name a place never reached."""

from __future__ import annotations

import os
from urllib.parse import urlsplit
from urllib.request import url2pathname

from envkit.errors import NetworkError
from envkit.io.http import Http
from envkit.io.redaction import redact

_UNREACHED = (
    "A lock must reach every index it names (uv's cache does not answer for one that is "
    "gone): check the network and the URL (--index-url, --torch-index). Nothing was changed."
)


def probe(url: str, page: str, http: Http) -> NetworkError | None:
    """Whether the index at ``url`` answers (``page`` below it, for an http(s) index)."""
    if url.lower().startswith(("http://", "https://")):
        try:
            http.reach(url.rstrip("/") + "/" + page)
        except NetworkError as exc:
            return NetworkError(
                exc.message,
                _UNREACHED,
                url=exc.url,
                status=exc.status,
                kind=exc.kind or "unreachable",
            )
        return None
    local = url2pathname(urlsplit(url).path) if url.lower().startswith("file:") else url
    if os.path.isdir(local):
        return None
    return NetworkError(
        f"Cannot reach {redact(url)}: no such folder.",
        _UNREACHED,
        url=redact(url),
        kind="unreachable",
    )
