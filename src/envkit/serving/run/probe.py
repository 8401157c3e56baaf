"""``envkit probe``: is a running OpenAI-compatible server (vLLM) answering?

Two requests, in the order field report 2 checks by hand: ``GET {base}/models``, then a
``POST {base}/chat/completions`` with ``max_tokens`` 16. When the URL as given fails, the
usual mistakes are tried in turn (no ``/v1``, a doubled ``/v1``, an endpoint path given as the
base) and the base URL that works is named: still a failure (``ok`` false, exit 1), since
a client given that URL would fail. The API key comes from an environment variable
and is sent, never shown.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from envkit.errors import BadInput, NetworkError
from envkit.io.escaping import described
from envkit.io.http import Http, seconds_from_env
from envkit.io.redaction import redact, remember_secret
from envkit.io.urls import parse_url
from envkit.results import Result, Severity

_ENDPOINTS = ("/chat/completions", "/completions", "/models", "/embeddings")


@dataclass(frozen=True, kw_only=True)
class Answer:
    url: str
    status: int  # 0: no HTTP answer at all
    body: Any = None
    problem: str = ""  # a plain explanation when it failed
    seconds: float = 0.0


@dataclass(frozen=True, kw_only=True)
class ProbeResult:
    given: str
    base: str  # the base URL that works ('' when none does)
    tried: tuple[Answer, ...]
    models: tuple[str, ...] = ()
    chat: Answer | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    first: str = ""  # the URL as given, tidied (no trailing slash): the first one tried

    @property
    def answers(self) -> bool:
        """The server answers as an OpenAI-compatible API at ``base`` (wherever that is)."""
        chat = self.chat
        return bool(self.base) and chat is not None and chat.status == 200 and not chat.problem

    @property
    def given_works(self) -> bool:
        """The URL as given is the base URL that works (not one of its corrections)."""
        return bool(self.base) and self.base == self.first

    @property
    def ok(self) -> bool:
        """It answers, at the URL given: a corrected URL is a wrong URL (exit 1)."""
        return self.answers and self.given_works

    @property
    def result(self) -> Result:
        """The probe's verdict as the one record: the server answers at the URL given
        (``server-answers``), only at a corrected one (``server-answers-elsewhere``, its fix
        the base URL to use), or not as an OpenAI-compatible API (``server-does-not-answer``).
        Its evidence is the base URL that works and what the chat did."""
        chat = self.chat
        facts = {"given": self.given}
        if self.base:
            facts["base_url"] = self.base
        if chat is not None:
            facts["chat"] = f"{chat.status or 'no answer'} in {chat.seconds:.2f} s"
        if self.ok:
            return Result(
                code="server-answers",
                severity=Severity.OK,
                subject=self.base,
                message=f"The server answers at {self.base}.",
                evidence=facts,
            )
        if self.answers:
            return Result(
                code="server-answers-elsewhere",
                severity=Severity.ERROR,
                subject=self.given,
                message=f"The server answers at {self.base}, not at {self.given}: use {self.base}.",
                evidence=facts,
                fix=f"use {self.base} as the base URL",
            )
        return Result(
            code="server-does-not-answer",
            severity=Severity.ERROR,
            subject=self.given,
            message="The server does not answer as an OpenAI-compatible API.",
            evidence=facts,
        )

    def to_dict(self) -> dict[str, Any]:
        def answer(a: Answer) -> dict[str, Any]:
            return {
                "url": a.url,
                "status": a.status,
                "problem": a.problem,
                "seconds": round(a.seconds, 3),
            }

        return {
            "ok": self.ok,
            "given": self.given,
            "base_url": self.base or None,
            "answers": self.answers,
            "given_works": self.given_works,
            "models": list(self.models),
            "tried": [answer(a) for a in self.tried],
            "chat": answer(self.chat) if self.chat else None,
            "reply": _reply(self.chat.body) if self.chat and self.chat.status == 200 else None,
            "notes": list(self.notes),
            "result": self.result.to_dict(),
        }


def candidates(given: str) -> list[str]:
    """The URL as given, then the usual mistakes corrected, without repeats."""
    parse_url(given, "BASE_URL")  # BadInput unless an http(s) URL with a usable host and port
    parts = urlsplit(given.strip())
    path = parts.path.rstrip("/")
    for endpoint in _ENDPOINTS:
        if path.endswith(endpoint):
            path = path[: -len(endpoint)]
    while path.endswith("/v1/v1"):
        path = path[:-3]
    bare = path[:-3] if path.endswith("/v1") else path

    def url(p: str) -> str:
        return urlunsplit((parts.scheme, parts.netloc, p, "", ""))

    out: list[str] = []
    for option in (url(parts.path.rstrip("/")), url(bare + "/v1"), url(bare)):
        if option not in out:
            out.append(option)
    return out


MAX_ANSWER = 8 * 1024 * 1024  # a models list or a 16-token reply is a few KB


def _request(url: str, key: str, http: Http, payload: Any = None) -> Answer:
    secrets = {"Authorization": f"Bearer {key}"} if key else {}
    start = time.monotonic()
    try:
        answer = http.request(
            "POST" if payload is not None else "GET",
            url,
            headers={"Accept": "application/json"},
            secret_headers=secrets,
            json_body=payload,
            max_bytes=MAX_ANSWER,
        )
    except NetworkError as exc:
        return Answer(
            url=url, status=0, problem=_unreachable(exc, http), seconds=time.monotonic() - start
        )
    elapsed = time.monotonic() - start
    status, raw = answer.status, answer.body
    try:
        body = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        snippet = raw[:80].decode("utf-8", "replace").strip()
        return Answer(
            url=url,
            status=status,
            seconds=elapsed,
            problem=(
                f"HTTP {status} with a body that is not JSON ({snippet!r}...): not an "
                "OpenAI-compatible endpoint, or a proxy answering in its place"
            ),
        )
    return Answer(
        url=url,
        status=status,
        body=body,
        seconds=elapsed,
        problem="" if status == 200 else _explain(status, body),
    )


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def _unreachable(exc: NetworkError, http: Http) -> str:
    if exc.kind == "connect-timeout":
        return (
            f"no answer within {http.timeout:.0f} s: nothing accepted the connection in time "
            "(a firewall, or the wrong host)"
        )
    if exc.kind == "timeout":
        return (
            f"no answer within {http.timeout:.0f} s: the server is still loading the model or "
            "stuck (a large profiling image looks like a hang); look at its log"
        )
    if exc.kind == "refused":
        return (
            "connection refused: nothing listens there (the server is not running, "
            "still starting, or on another host or port)"
        )
    return exc.message


def _explain(status: int, body: Any) -> str:
    detail = ""
    if isinstance(body, dict):
        err = body.get("error") or body.get("detail") or body.get("message")
        detail = str(err.get("message", "")) if isinstance(err, dict) else str(err or "")
    text = {
        401: "HTTP 401: the server wants an API key (vllm serve --api-key); pass the name of "
        "the variable that holds it with --api-key-env",
        403: "HTTP 403: the key was refused",
        404: "HTTP 404: no such endpoint here: a wrong base URL (missing or doubled /v1?) or "
        "a model name the server does not serve",
        500: "HTTP 500: the server failed while answering; its log has the traceback",
    }.get(status, f"HTTP {status}")
    return f"{text}" + (f" ({detail[:200]})" if detail else "")


def _reply(body: Any) -> str:
    message = _message(body)
    return str(message.get("content") or "")[:200] if isinstance(message, dict) else ""


def _message(body: Any) -> dict[str, Any] | str:
    """``choices[0].message`` of a chat answer, or why there is none usable (a string)."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices:
        return "HTTP 200 without choices: not an OpenAI-compatible answer"
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        return (
            "HTTP 200, but choices[0] holds no message object: not an OpenAI-compatible chat answer"
        )
    content = message.get("content", 0)  # null is allowed (a reply that is a tool call)
    if content is not None and not isinstance(content, str):
        what = (
            " has no content"
            if "content" not in message
            else f".content is {described(content)}, not a string"
        )
        return f"HTTP 200, but choices[0].message{what}: not an OpenAI-compatible chat answer"
    return message


def probe(
    given: str, *, model: str | None, key_env: str | None, timeout: float, key: str = ""
) -> ProbeResult:
    """Probe ``given`` (see the module's docstring) with the key in ``key_env``, or ``key``
    itself (``serve`` knows it)."""
    remember_secret(key)
    if key_env:
        if key_env not in os.environ:
            raise BadInput(
                f"--api-key-env {key_env}: no such environment variable is set.",
                "Export it first; envkit reads the key from it and never prints it.",
            )
        key = os.environ[key_env].strip()
        remember_secret(key)  # masked wherever it would appear, a server's echo included
    # one deadline per request: a server that drips its answer is not waited on for ever
    limit = timeout + 5
    http = Http(
        timeout=timeout, deadline=min(seconds_from_env("ENVKIT_HTTP_DEADLINE", limit), limit)
    )
    tried: list[Answer] = []
    base, listing = "", None
    urls = candidates(given)
    for url in urls:
        answer = _request(url + "/models", key, http)
        tried.append(answer)
        if (
            answer.status == 200
            and isinstance(answer.body, dict)
            and isinstance(answer.body.get("data"), list)
        ):
            base, listing = url, answer
            break
        if answer.status == 200 and not answer.problem:
            tried[-1] = Answer(
                url=answer.url,
                status=200,
                seconds=answer.seconds,
                problem="HTTP 200 without a list of models ('data'): not an OpenAI-compatible "
                "endpoint, or a proxy answering in its place",
            )
        if answer.status == 0 and answer.problem.startswith("connection refused"):
            break  # the host itself does not answer: other paths will not either
        if answer.status in (401, 403):
            break  # the path is right; the key is not
    notes: list[str] = []
    if not base:
        return ProbeResult(given=redact(given), base="", tried=tuple(tried), first=urls[0])
    if base != urls[0]:
        notes.append(f"use {base} as the base URL (not {given}); clients append /chat/completions")
    models = (
        tuple(str(m.get("id")) for m in listing.body["data"] if isinstance(m, dict))
        if listing
        else ()
    )
    chosen = model or (models[0] if models else "")
    if model and models and model not in models:
        notes.append(f"the server does not list {model!r}; it serves {', '.join(models)}")
    chat = _request(
        base + "/chat/completions",
        key,
        http,
        {
            "model": chosen,
            "max_tokens": 16,
            "messages": [{"role": "user", "content": "Say OK."}],
        },
    )
    usable = _message(chat.body) if chat.status == 200 else None
    if isinstance(usable, str):
        chat = Answer(
            url=chat.url, status=chat.status, body=chat.body, seconds=chat.seconds, problem=usable
        )
    return ProbeResult(
        given=redact(given),
        base=base,
        tried=tuple(tried),
        models=models,
        chat=chat,
        notes=tuple(notes),
        first=urls[0],
    )


def answers(base: str, *, key: str, timeout: float) -> bool:
    """Whether an HTTP server answers ``GET {base}/models`` within ``timeout`` seconds (any
    status: a 401 is a server that is up). ``serve`` asks this when the log has not said."""
    http = Http(timeout=timeout, deadline=timeout + 1)
    return _request(base + "/models", key, http).status != 0
