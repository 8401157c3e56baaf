"""Every HTTP request envkit makes: httpx underneath, envkit's rules on top.

httpx brings connection reuse, proxies from the environment (``HTTPS_PROXY``, ``NO_PROXY``),
``SSL_CERT_FILE`` and gzip; truststore, when installed, adds the system trust store. What
this module adds is what a tool that holds people's credentials must guarantee:

- **Credentials stay with their origin.** A URL's userinfo (``https://user:token@host``), a
  ``~/.netrc`` entry (``$NETRC``) and a caller's secret headers (an API key, a Hub token) go
  only to the scheme, host and port they were given for. Redirects are followed here, not by
  httpx (which keeps ``Authorization`` across an http-to-https hop): a hop to another origin
  carries no credentials but a netrc entry of its own.
- **Bounded work.** One deadline covers the whole exchange, redirects and body included, even
  against a server that drips a byte at a time; the body is capped (a ``Content-Length``
  above the cap is refused before anything is read). One client's requests together have a
  budget too (``ENVKIT_HTTP_BUDGET``, by default ten deadlines): the time during which any
  of them is under way, so an index that lists endless releases cannot keep a command busy.
  A ``Content-Encoding`` is undone here (``io.inflate``), not by httpx: every layer of a
  stacked one (``gzip, gzip``) inflates in pieces within the same cap as the body.
- **One kind of failure.** DNS, refused connections, timeouts, TLS and protocol errors are all
  :class:`NetworkError` naming the redacted URL; an HTTP error status carries its ``status``.
"""

from __future__ import annotations

import contextlib
import functools
import io
import netrc
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from envkit.errors import BadInput, NetworkError, TooLarge
from envkit.io import inflate
from envkit.io.budget import Busy, seconds_setting
from envkit.io.interrupts import within_deadline
from envkit.io.redaction import redact
from envkit.io.urls import Target, basic_authorization, parse_url

if TYPE_CHECKING:  # imported where a request is made: 0.1 s that offline commands skip
    import ssl

    import httpx

USER_AGENT = "envkit"
MAX_REDIRECTS = 10
MiB = 1024 * 1024
DEFAULT_MAX_BYTES = 32 * MiB
DEFAULT_DEADLINE = 60.0
REACH_BYTES = 64 * 1024  # what a reachability probe reads of an index page, at most
_REDIRECTS = (301, 302, 303, 307, 308)


@dataclass
class Traffic:
    """Bytes and requests spent, for reports and the benchmark (counted from any thread)."""

    requests: int = 0
    bytes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, *, requests: int = 0, bytes: int = 0) -> None:
        with self._lock:
            self.requests += requests
            self.bytes += bytes


@dataclass(frozen=True)
class Response:
    url: str  # the final URL, without credentials
    status: int
    headers: Mapping[str, str]
    body: bytes

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


# What importing httpx would load for nothing: httpcore imports trio whenever it is installed
# (with attrs, sortedcontainers and outcome, some 950 KB of Python), httpx its command line
# (pygments; rich where installed). envkit's client is synchronous; it never runs httpx's CLI.
_UNUSED_BY_HTTPX = ("trio", "httpx._main")
_import_lock = threading.Lock()


@contextlib.contextmanager
def httpx_alone() -> Iterator[None]:
    """A block that imports httpx, or makes its first client (which imports httpcore), as
    where ``_UNUSED_BY_HTTPX`` is absent (both import those only if they can); they stay
    importable after it."""
    with _import_lock:
        done = "httpcore" in sys.modules  # the first client made: nothing left to import
        hidden = [] if done else [n for n in _UNUSED_BY_HTTPX if n not in sys.modules]
        for name in hidden:
            sys.modules[name] = None  # type: ignore[assignment]  # import raises ImportError
        try:
            yield
        finally:
            for name in hidden:
                if name in sys.modules and sys.modules[name] is None:
                    del sys.modules[name]


def netrc_authorization(host: str) -> str:
    """Basic credentials for ``host`` from ``$NETRC`` or ``~/.netrc``, as uv and pip read them."""
    path = os.environ.get("NETRC") or os.path.join(os.path.expanduser("~"), ".netrc")
    if not os.path.isfile(path):
        return ""
    try:
        found = netrc.netrc(path).authenticators(host)
    except (OSError, netrc.NetrcParseError, UnicodeDecodeError):
        return ""  # a netrc we cannot read gives no credentials, as for uv
    if not found:
        return ""
    login, _account, password = found
    return basic_authorization(login or "", password or "")


def _ssl_context() -> ssl.SSLContext | bool:
    """The system trust store (truststore), or SSL_CERT_FILE's or SSL_CERT_DIR's, as httpx."""
    return _context(os.environ.get("SSL_CERT_FILE", ""), os.environ.get("SSL_CERT_DIR", ""))


@functools.cache  # once per process and setting: a context or a bundle costs tens of ms
def _context(cafile: str, capath: str) -> ssl.SSLContext | bool:
    import ssl  # by the first request: a command that sends none loads no TLS

    if cafile or capath:
        return ssl.create_default_context(cafile=cafile or None, capath=None if cafile else capath)
    try:
        import truststore
    except ImportError:  # pragma: no cover - truststore is a dependency
        return True
    return truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def seconds_from_env(name: str, default: float) -> float:
    """A number of seconds from the environment (``ENVKIT_HTTP_TIMEOUT``,
    ``ENVKIT_HTTP_DEADLINE``); BadInput unless a number above 0 and at most an hour."""
    return seconds_setting(name, default, 3600)


def _budget() -> float:
    default = 10 * seconds_from_env("ENVKIT_HTTP_DEADLINE", DEFAULT_DEADLINE)
    return seconds_setting("ENVKIT_HTTP_BUDGET", default, 86400)


@dataclass
class Http:
    """An HTTP client with envkit's credential, deadline and size rules."""

    # one connect or read, and one whole exchange (redirects and body included)
    timeout: float = field(default_factory=lambda: seconds_from_env("ENVKIT_HTTP_TIMEOUT", 30.0))
    deadline: float = field(
        default_factory=lambda: seconds_from_env("ENVKIT_HTTP_DEADLINE", DEFAULT_DEADLINE)
    )
    max_bytes: int = DEFAULT_MAX_BYTES
    # every request of this client together: the time any of them is under way
    budget: float = field(default_factory=_budget)
    traffic: Traffic = field(default_factory=Traffic)
    _busy: Busy = field(default_factory=Busy, init=False, repr=False)
    _client: httpx.Client | None = field(default=None, init=False, repr=False)
    # Credentials given in a URL serve every later URL of the same origin (the wheel files
    # an index page links to), as uv keeps them per realm; never another origin.
    _realms: dict[tuple[str, str, int], str] = field(default_factory=dict, init=False, repr=False)

    def remember(self, url: str) -> None:
        """Keep the credentials ``url`` carries (if any) for every later URL of its origin,
        as a request to it would: the files an index links to on its own host. A local
        (file://) index has none to keep."""
        if url.lower().startswith(("http://", "https://")):
            self._keep(parse_url(url))

    def _keep(self, given: Target) -> None:
        if given.authorization:
            self._realms[given.origin] = given.authorization

    def client(self) -> httpx.Client:
        with _open_lock:  # one client, even when threads ask at once
            if self._client is None:
                with httpx_alone():
                    import httpx

                    self._client = httpx.Client(
                        follow_redirects=False, trust_env=True, verify=_ssl_context(), http2=False
                    )
                _open.append(self._client)
            return self._client

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        secret_headers: Mapping[str, str] | None = None,
        json_body: Any = None,
        max_bytes: int | None = None,
        deadline: float | None = None,
        consume: Callable[[Iterator[bytes]], object] | None = None,
    ) -> Response:
        """One exchange, redirects followed under the credential rules. Any status returns;
        NetworkError when there is no usable answer in time or the body is too large. With
        ``consume``, a 200 answer's body goes to it as it comes (until it returns), not kept."""
        limit = self.max_bytes if max_bytes is None else max_bytes
        asked = self.deadline if deadline is None else deadline
        left = self.budget - self._busy.spent()
        if left <= 0:
            raise _budget_error(url, self.budget)
        seconds = min(asked, left)
        given = (method, url, headers or {}, secret_headers or {}, json_body)
        try:
            with self._busy:
                return within_deadline(
                    lambda: self._exchange(*given, limit, seconds, consume),
                    seconds,
                    lambda: _deadline_error(url, seconds),
                )
        except NetworkError as exc:
            if seconds < asked and exc.kind == "timeout":  # the budget ran out, not the server
                raise _budget_error(url, self.budget) from None
            raise

    def reach(self, url: str) -> None:
        """Whether a server answers at ``url`` at all (a lock that names an index must reach
        it, whatever uv's cache could answer): NetworkError ``Cannot reach URL`` when nothing
        answers within the deadline or the server fails (HTTP 5xx). Any other status is an
        answer; at most :data:`REACH_BYTES` of the body are read."""
        try:
            answer = self.request("GET", url, max_bytes=REACH_BYTES)
        except TooLarge:
            return  # it answered, with more than a probe reads
        if answer.status >= 500:
            raise NetworkError(
                f"Cannot reach {redact(url)}: it answered HTTP {answer.status}.",
                "The index is failing; try again later or use another one. Nothing was changed.",
                url=redact(url),
                status=answer.status,
                kind="unreachable",
            )

    def get_range(self, url: str, start: int, end: int) -> tuple[bytes, int | None]:
        """Bytes ``start`` to ``end`` inclusive (``start`` < 0: the last -start bytes), and the
        file's total size when the server said it."""
        spec = f"bytes={start}" if start < 0 else f"bytes={start}-{end}"
        want = -start if start < 0 else end - start + 1
        try:
            answer = self.request("GET", url, headers={"Range": spec}, max_bytes=want)
        except TooLarge:  # a 200 with the whole file
            raise _no_ranges(url) from None
        if answer.status == 416 and start < 0:  # the file is shorter than the suffix asked
            return self.get_range(url, 0, want - 1)
        if answer.status not in (200, 206):
            raise status_error(url, answer.status)
        total = None
        content_range = answer.headers.get("content-range", "")
        if "/" in content_range:
            tail = content_range.rpartition("/")[2].strip()
            total = int(tail) if tail.isascii() and tail.isdigit() else None
        if answer.status == 200:
            total = len(answer.body)  # a small file, sent whole: still within the asked size
        return answer.body, total

    def _exchange(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        secrets: Mapping[str, str],
        json_body: Any,
        limit: int,
        seconds: float,
        consume: Callable[[Iterator[bytes]], object] | None,
    ) -> Response:
        with httpx_alone():
            import httpx

        ends = time.monotonic() + seconds
        first = parse_url(url)
        self._keep(first)
        target = first
        for _hop in range(MAX_REDIRECTS + 1):
            send = {"User-Agent": USER_AGENT, "Accept-Encoding": inflate.ACCEPTED, **headers}
            if target.origin == first.origin:
                auth = self._realms.get(first.origin) or netrc_authorization(first.origin[1])
                send.update(secrets)
            else:  # another origin: nothing the caller gave goes there
                auth = netrc_authorization(target.origin[1])
            if auth and "Authorization" not in send:
                send["Authorization"] = auth
            remaining = ends - time.monotonic()
            if remaining <= 0:
                raise _deadline_error(url, seconds)
            budget = httpx.Timeout(min(self.timeout, remaining))
            try:
                with self.client().stream(
                    method, target.url, headers=send, json=json_body, timeout=budget
                ) as answer:
                    self.traffic.add(requests=1)
                    location = answer.headers.get("location")
                    if answer.status_code in _REDIRECTS and location:
                        target = parse_url(urljoin(target.url, location))
                        if answer.status_code == 303 or (
                            answer.status_code in (301, 302) and method == "POST"
                        ):
                            method, json_body = "GET", None
                        continue
                    body = io.BytesIO()  # its value is handed over without a copy
                    if consume is None or answer.status_code != 200:
                        consume = body.writelines
                    consume(self._pieces(answer, url, limit, ends, seconds))
                    return Response(
                        url=target.url,
                        status=answer.status_code,
                        headers={k.lower(): v for k, v in answer.headers.items()},
                        body=body.getvalue(),
                    )
            except httpx.TimeoutException as exc:
                error = _deadline_error(url, min(self.timeout, seconds))
                connect = isinstance(exc, httpx.ConnectTimeout)
                error.kind = "connect-timeout" if connect else "timeout"
                raise error from None
            except httpx.HTTPError as exc:
                raise unreachable(url, exc) from None
            except BadInput as exc:  # a redirect to something that is not an http(s) URL
                raise NetworkError(
                    f"{redact(url)} redirected to an unusable location: {exc.message}",
                    "The server is misconfigured, or not the one you meant.",
                    url=redact(url),
                ) from None
        raise NetworkError(
            f"{redact(url)} redirected more than {MAX_REDIRECTS} times.",
            "The server is misconfigured, or not the one you meant.",
            url=redact(url),
        )

    def _pieces(
        self, answer: httpx.Response, url: str, limit: int, ends: float, seconds: float
    ) -> Iterator[bytes]:
        declared = answer.headers.get("content-length", "")
        if declared.isascii() and declared.isdigit() and int(declared) > limit:
            raise _too_large(url, limit)
        sent = 0

        def raw() -> Iterator[bytes]:  # as sent, counted and capped before it is decoded
            nonlocal sent
            for chunk in answer.iter_raw():
                sent += len(chunk)
                self.traffic.add(bytes=len(chunk))
                if sent > limit:
                    raise _too_large(url, limit)
                if time.monotonic() > ends:
                    raise _deadline_error(url, seconds)
                yield chunk

        encoding = answer.headers.get("content-encoding", "")
        try:
            for piece in inflate.decoded(raw(), encoding, limit):  # each layer within limit
                yield piece
                if time.monotonic() > ends:
                    raise _deadline_error(url, seconds)
        except inflate.Inflated:
            raise _too_large(url, limit) from None
        except inflate.Undecodable as exc:
            raise NetworkError(
                f"{redact(url)} sent {exc}.",
                "The server is not answering what envkit asked; check the URL.",
                url=redact(url),
                kind="bad-answer",
            ) from None


_open: list[httpx.Client] = []
_open_lock = threading.Lock()


def close_all() -> None:
    """Close every connection this process opened (the CLI calls it when a command ends)."""
    with _open_lock:
        clients, _open[:] = list(_open), []
    for client in clients:
        with contextlib.suppress(Exception):  # one a dead worker holds: closing is enough
            client.close()


def status_error(url: str, status: int) -> NetworkError:
    hint = {
        401: "The server wants credentials: put them in the URL (https://user:token@host/...) "
        "or in ~/.netrc, as for uv.",
        403: "The credentials were refused, or the resource is gated.",
        404: "Check the name and version, or the URL.",
    }.get(status, "Check the URL, or try again later.")
    return NetworkError(
        f"{redact(url)} answered HTTP {status}.", hint, url=redact(url), status=status
    )


def unreachable(url: str, exc: Exception) -> NetworkError:
    reason = str(exc) or type(exc).__name__
    error = NetworkError(
        f"Cannot reach {redact(url)}: {redact(reason)}.",
        "Check the network, the URL and any proxy settings (HTTPS_PROXY); results read "
        "before are cached and work offline.",
        url=redact(url),
    )
    error.kind = "refused" if "refused" in reason.lower() else "unreachable"
    return error


def _deadline_error(url: str, seconds: float) -> NetworkError:
    return NetworkError(
        f"Cannot reach {redact(url)}: no complete answer within {seconds:g} s.",
        "The server is too slow or stuck; try again later or use another index.",
        url=redact(url),
        kind="timeout",
    )


def _budget_error(url: str, budget: float) -> NetworkError:
    return NetworkError(
        f"Stopped before {redact(url)}: this command's requests have taken {budget:.0f} s "
        "together, its whole budget (ENVKIT_HTTP_BUDGET).",
        "The index answers too slowly or lists far more than a release index holds; use "
        "another index, or raise ENVKIT_HTTP_BUDGET.",
        url=redact(url),
        kind="timeout",
    )


def _too_large(url: str, limit: int) -> TooLarge:
    return TooLarge(
        f"{redact(url)} sent an answer larger than envkit reads ({limit:,} bytes).",
        "The server is not answering what envkit asked; check the URL.",
        url=redact(url),
        kind="too-large",
    )


def _no_ranges(url: str) -> NetworkError:
    return NetworkError(
        f"{redact(url)} does not serve byte ranges.",
        "Use an index that supports HTTP range requests, or install the package and scan "
        "it locally.",
        url=redact(url),
    )
