"""Credentials stay with their origin and out of every output and file (issue: trust)."""

from __future__ import annotations

import base64
import json
import urllib.request
from pathlib import Path

import loopback
import pytest
from hypothesis import given
from hypothesis import strategies as st

from envkit.io.redaction import redact
from envkit.io.urls import parse_url

import indexserver
from helpers import run_cli

KEY = "sk-trust-0123456789abcdef"
TOKEN = "hf_trustTOKEN0123456789"


def models(handler: loopback.Handler) -> None:
    handler.send(200, json.dumps({"data": [{"id": "m"}]}).encode())


def chat(handler: loopback.Handler) -> None:
    handler.send(200, json.dumps({"choices": [{"message": {"content": "OK"}}]}).encode())


def test_probe_never_follows_a_redirect_with_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROBE_KEY", KEY)
    with loopback.serve({"/v1/models": models, "/v1/chat/completions": chat}) as other:
        target = loopback.origin(other)
        routes = {
            "/v1/models": lambda h: h.redirect(f"{target}/v1/models", 307),
            "/v1/chat/completions": lambda h: h.redirect(f"{target}/v1/chat/completions", 307),
        }
        with loopback.serve(routes) as first:
            res = run_cli(
                "probe", loopback.origin(first) + "/v1", "--api-key-env", "PROBE_KEY", "--json"
            )
    res.assert_ok()
    assert loopback.authorizations(first) == [f"Bearer {KEY}"] * 2
    # another port is another origin: it got the requests, never the key
    assert len(other.seen) == 2 and loopback.authorizations(other) == ["", ""]
    assert KEY not in res.out + res.err


def test_a_redirect_within_the_origin_keeps_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROBE_KEY", KEY)
    routes = {
        "/v1/models": lambda h: h.redirect("/v2/models", 302),
        "/v2/models": models,
        "/v1/chat/completions": chat,
    }
    with loopback.serve(routes) as server:
        res = run_cli("probe", loopback.origin(server) + "/v1", "--api-key-env", "PROBE_KEY")
    res.assert_ok()
    assert loopback.authorizations(server) == [f"Bearer {KEY}"] * 3


def test_a_server_that_echoes_the_key_does_not_get_it_printed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PROBE_KEY", KEY)

    def echo(handler: loopback.Handler) -> None:
        sent = handler.headers.get("Authorization", "")
        handler.send(401, json.dumps({"error": {"message": f"bad key: {sent}"}}).encode())

    with loopback.serve({"/v1/models": echo}) as server:
        for extra in ((), ("--json",)):
            res = run_cli(
                "probe", loopback.origin(server) + "/v1", "--api-key-env", "PROBE_KEY", *extra
            )
            assert res.code == 1
            assert KEY not in res.out + res.err
            assert "***" in res.out + res.err


def test_doctor_shows_no_secret_values(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PIP_INDEX_URL", "https://builder:hunter2-pass@idx.example/simple")
    monkeypatch.setenv("UV_INDEX_URL", "https://:tok3n-only-value@idx.example/simple")
    monkeypatch.setenv("VLLM_SERVE_ARGS", "--api-key sk-inline0123456789 --port 8000")
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    res = run_cli("doctor", "--json")
    assert res.code in (0, 1), res.err
    text = res.out + res.err
    for secret in ("hunter2-pass", "tok3n-only-value", "sk-inline0123456789", TOKEN):
        assert secret not in text
    env = json.loads(res.out)["environment"]
    assert env["VLLM_SERVE_ARGS"] == "***" and env["PIP_INDEX_URL"] == "***"


@pytest.mark.parametrize(
    "url",
    [
        "http://user:pa55word@127.0.0.1/simple",  # no port: once a traceback printing it
        "http://:pa55word@127.0.0.1:9/simple",
        "http://pa55word@127.0.0.1:9/simple",
        "http://user:pa55@word@127.0.0.1:9/simple",
    ],
)
def test_credentials_in_index_urls_never_show(url: str, scan_cache: Path, tmp_path: Path) -> None:
    for extra in ((), ("--json",)):
        res = run_cli("scan", "vllm==0.8.5", "--index-url", url, *extra)
        assert res.code == 2
        text = res.out + res.err
        assert "pa55" not in text and "word@" not in text
        assert "Cannot reach http://***@127.0.0.1" in text


@given(
    scheme=st.sampled_from(["http", "https"]),
    user=st.text(
        st.characters(
            blacklist_characters="/?#@\"'<> \t\r\n\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0",
            blacklist_categories=("Zs", "Zl", "Zp", "Cc"),
        ),
        max_size=12,
    ),
    password=st.text(
        st.characters(
            blacklist_characters="/?#\"'<> ", blacklist_categories=("Zs", "Zl", "Zp", "Cc")
        ),
        min_size=1,
        max_size=12,
    ),
    form=st.sampled_from(["{u}:{p}@", ":{p}@", "{p}@"]),
)
def test_every_userinfo_form_is_redacted(scheme: str, user: str, password: str, form: str) -> None:
    userinfo = form.format(u=user, p=password)
    url = f"{scheme}://{userinfo}index.example:8080/simple/vllm/"
    assert redact(f"see {url} now") == f"see {scheme}://***@index.example:8080/simple/vllm/ now"
    assert redact(json.dumps({"url": url})) == json.dumps(
        {"url": f"{scheme}://***@index.example:8080/simple/vllm/"}
    )


def test_userinfo_becomes_basic_auth_for_its_origin_only() -> None:
    target = parse_url("https://user:p%40ss@Index.Example/simple")
    assert (
        target.url == "https://index.example/simple" or target.url == "https://Index.Example/simple"
    )
    assert target.origin == ("https", "index.example", 443)
    assert target.authorization.startswith("Basic ")


def authenticating_proxy(upstream: str, expected: str) -> loopback.Route:
    """Every path of ``upstream``, behind HTTP basic auth (401 without ``expected``)."""

    def route(handler: loopback.Handler) -> None:
        if handler.headers.get("Authorization") != expected:
            handler.send(401, b'{"error": "credentials"}')
            return
        wanted = {k: v for k, v in handler.headers.items() if k in ("Accept", "Range")}
        request = urllib.request.Request(upstream + handler.path, headers=wanted)
        with urllib.request.urlopen(request) as answer:
            body = answer.read()
            extra = {"Content-Range": answer.headers["Content-Range"]}
            handler.send(
                answer.status,
                body,
                answer.headers["Content-Type"] or "application/octet-stream",
                {k: v for k, v in extra.items() if v},
            )

    return route


def test_index_credentials_from_the_url_and_from_netrc(
    world: indexserver.Server, scan_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    upstream = indexserver.url(world).rsplit("/simple", 1)[0]
    password = "p@ss w0rd"
    expected = "Basic " + base64.b64encode(f"builder:{password}".encode()).decode()
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    with loopback.serve({"*": authenticating_proxy(upstream, expected)}) as server:
        host, port = loopback.host_port(server)
        plain = f"http://{host}:{port}/simple"
        refused = run_cli("scan", "transformers==4.51.3", "--index-url", plain)
        assert refused.code == 2 and "HTTP 401" in refused.err and "netrc" in refused.err
        quoted = password.replace("@", "%40").replace(" ", "%20")
        in_url = f"http://builder:{quoted}@{host}:{port}/simple"
        res = run_cli("scan", "transformers==4.51.3", "--index-url", in_url, "--no-cache")
        res.assert_ok()
        assert "p%40ss" not in res.out + res.err
        netrc = tmp_path / "netrc"
        netrc.write_text(f"machine {host}\nlogin builder\npassword {password.replace(' ', '_')}\n")
        # netrc passwords hold no spaces: a second server expects the underscore form
    expected_netrc = "Basic " + base64.b64encode(b"builder:p@ss_w0rd").decode()
    with loopback.serve({"*": authenticating_proxy(upstream, expected_netrc)}) as server:
        host, port = loopback.host_port(server)
        monkeypatch.setenv("NETRC", str(netrc))
        res = run_cli(
            "scan", "transformers==4.51.3", "--index-url", f"http://{host}:{port}/simple",
            "--no-cache",
        )  # fmt: skip
        res.assert_ok()
        assert all(a == expected_netrc for a in loopback.authorizations(server))
