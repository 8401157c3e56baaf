"""envkit probe against a real HTTP server on 127.0.0.1, one failure mode at a time."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from envkit.errors import BadInput
from envkit.results import Result
from envkit.serving.run.probe import candidates

from helpers import envkit

KEY = "sk-test-0123456789abcdef"


class Server(ThreadingHTTPServer):
    mode = "ok"
    seen_keys: list[str]

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that timed out closed the socket: expected in the slow mode


class Handler(BaseHTTPRequestHandler):
    server: Server

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _guard(self) -> bool:
        self.server.seen_keys.append(self.headers.get("Authorization", ""))
        mode = self.server.mode
        if mode == "html":
            self._send(200, b"<html>proxy login</html>", "text/html")
            return False
        if mode == "slow":
            time.sleep(1.5)
        if mode == "key" and self.headers.get("Authorization") != f"Bearer {KEY}":
            self._send(401, json.dumps({"error": {"message": "Unauthorized"}}).encode())
            return False
        return True

    def do_GET(self) -> None:
        if not self._guard():
            return
        if self.path == "/v1/models":
            body = {"object": "list", "data": [{"id": "Qwen/Qwen2-VL-2B-Instruct"}]}
            self._send(200, json.dumps(body).encode())
        else:
            self._send(404, b'{"detail": "Not Found"}')

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        request = json.loads(self.rfile.read(length))
        if not self._guard():
            return
        if self.path != "/v1/chat/completions":
            self._send(404, b'{"detail": "Not Found"}')
        elif self.server.mode == "crash":
            self._send(500, b'{"error": {"message": "CUDA out of memory"}}')
        else:
            assert request["max_tokens"] == 16
            body = {
                "choices": [{"message": {"role": "assistant", "content": "OK"}}],
                "model": request["model"],
            }
            self._send(200, json.dumps(body).encode())


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server(("127.0.0.1", 0), Handler)
    srv.seen_keys = []
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def base(srv: Server) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


def test_candidates_correct_the_usual_mistakes() -> None:
    assert candidates("http://h:8000") == ["http://h:8000", "http://h:8000/v1"]
    assert candidates("http://h:8000/v1/v1") == [
        "http://h:8000/v1/v1",
        "http://h:8000/v1",
        "http://h:8000",
    ]
    assert candidates("http://h:8000/v1/chat/completions")[1] == "http://h:8000/v1"
    with pytest.raises(BadInput):
        candidates("127.0.0.1:8000")


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/v1", "/v1/chat/completions"])
def test_finds_the_base_url_that_works(server: Server, tmp_path: Path, suffix: str) -> None:
    """Found, and named; but a URL that needed correcting is a wrong URL: exit 1 (a client
    given it would fail), the right one named in the message and the document."""
    res = envkit("probe", base(server) + suffix, "--json", cwd=tmp_path)
    data = res.json()
    right = base(server) + "/v1"
    assert data["base_url"] == right and data["answers"] is True
    assert data["models"] == ["Qwen/Qwen2-VL-2B-Instruct"] and data["reply"] == "OK"
    if suffix == "/v1":
        res.assert_ok()
        assert data["ok"] is True and data["given_works"] is True and data["notes"] == []
    else:
        assert res.code == 1 and data["ok"] is False and data["given_works"] is False
        assert any("use " + right + " as the base URL" in n for n in data["notes"])
        text = envkit("probe", base(server) + suffix, cwd=tmp_path)
        text.assert_fails(1, mentioning=f"The server answers at {right}, not at {base(server)}")


def test_text_output_names_the_base(server: Server, tmp_path: Path) -> None:
    res = envkit("probe", base(server) + "/v1/", cwd=tmp_path)  # a trailing slash is the same
    assert res.code == 0
    assert f"The server answers at {base(server)}/v1." in res.out


def test_api_key_from_the_environment_is_sent_never_shown(server: Server, tmp_path: Path) -> None:
    server.mode = "key"
    without = envkit("probe", base(server) + "/v1", "--json", cwd=tmp_path)
    assert without.code == 1
    assert "HTTP 401" in without.json()["tried"][0]["problem"]
    assert "--api-key-env" in without.json()["tried"][0]["problem"]
    res = envkit(
        "probe", base(server) + "/v1", "--api-key-env", "MY_KEY", cwd=tmp_path, env={"MY_KEY": KEY}
    )
    assert res.code == 0
    assert f"Bearer {KEY}" in server.seen_keys
    assert KEY not in res.out + res.err + without.out + without.err
    missing = envkit("probe", base(server), "--api-key-env", "NOPE_NOT_SET", cwd=tmp_path)
    assert missing.code == 2 and "NOPE_NOT_SET" in missing.err


def test_server_error_and_non_json(server: Server, tmp_path: Path) -> None:
    server.mode = "crash"
    res = envkit("probe", base(server) + "/v1", "--json", cwd=tmp_path)
    assert res.code == 1
    chat = res.json()["chat"]
    assert chat["status"] == 500 and "its log has the traceback" in chat["problem"]
    assert "CUDA out of memory" in chat["problem"]
    server.mode = "html"
    res = envkit("probe", base(server) + "/v1", "--json", cwd=tmp_path)
    assert res.code == 1
    assert "not JSON" in res.json()["tried"][0]["problem"]


def test_refused_and_timeout(server: Server, tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    res = envkit("probe", f"http://127.0.0.1:{port}", "--json", cwd=tmp_path)
    assert res.code == 1
    tried = res.json()["tried"]
    assert len(tried) == 1 and "connection refused" in tried[0]["problem"]
    server.mode = "slow"
    res = envkit("probe", base(server) + "/v1", "--timeout", "0.5", "--json", cwd=tmp_path)
    assert res.code == 1
    assert "no answer within" in res.json()["tried"][0]["problem"]


@pytest.mark.parametrize(
    ("mode", "suffix", "code", "severity", "exit_code"),
    [
        ("ok", "/v1", "server-answers", "ok", 0),
        ("ok", "", "server-answers-elsewhere", "error", 1),
        ("crash", "/v1", "server-does-not-answer", "error", 1),
        ("key", "/v1", "server-does-not-answer", "error", 1),
    ],
)
def test_the_verdict_is_one_result_and_the_text_ends_with_its_message(
    server: Server, tmp_path: Path, mode: str, suffix: str, code: str, severity: str, exit_code: int
) -> None:
    """The probe's verdict is a Result in --json, and the text's last line is that result's
    message: the two cannot disagree."""
    server.mode = mode
    as_json = envkit("probe", base(server) + suffix, "--json", cwd=tmp_path)
    data = as_json.json()
    result = Result.from_dict(data["result"])
    assert (result.code, result.severity.value, as_json.code) == (code, severity, exit_code)
    assert result.fact("given") == data["given"] and result.fact("base_url") == (
        data["base_url"] or ""
    )
    if code == "server-answers-elsewhere":
        assert result.fix == f"use {data['base_url']} as the base URL"
    text = envkit("probe", base(server) + suffix, cwd=tmp_path)
    assert text.code == exit_code
    assert text.out.splitlines()[-1] == result.message
