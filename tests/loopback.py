"""Scripted HTTP servers on 127.0.0.1 for the trust tests: each path answers as a test says
(redirects, echoes, drips, lies about sizes), and every request's headers are recorded."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Route = Callable[["Handler"], None]


class Handler(BaseHTTPRequestHandler):
    server: Scripted
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        # headers and body leave in two writes: without this, each answer waits out the
        # client's delayed ACK (40 ms)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.body = self.rfile.read(length) if length else b""
        self.server.seen.append((self.command, self.path, dict(self.headers)))
        routes = self.server.routes
        route = routes.get(self.path.split("?")[0]) or routes.get("*")
        if route is None:
            self.send(404, b'{"error": "not found"}')
        else:
            route(self)

    do_GET = do_POST = do_HEAD = _handle

    def send(
        self,
        status: int,
        body: bytes,
        kind: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def redirect(self, location: str, status: int = 302) -> None:
        self.send(status, b"", headers={"Location": location})

    def drip(self, status_line: bytes, data: bytes, every: float) -> None:
        """Send ``status_line`` then ``data`` one byte at a time, ``every`` seconds apart."""
        try:
            self.wfile.write(status_line)
            self.wfile.flush()
            for byte in data:
                if self.server.stopping.is_set():
                    return
                time.sleep(every)
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
        except OSError:
            pass  # the client gave up: what the test wants


class Scripted(ThreadingHTTPServer):
    daemon_threads = True
    routes: dict[str, Route]
    seen: list[tuple[str, str, dict[str, str]]]
    stopping: threading.Event

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that gave up closed the socket


@contextmanager
def serve(routes: dict[str, Route] | None = None) -> Iterator[Scripted]:
    server = Scripted(("127.0.0.1", 0), Handler)
    server.routes = dict(routes or {})
    server.seen = []
    server.stopping = threading.Event()
    thread = threading.Thread(target=server.serve_forever, args=(0.005,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()


def host_port(server: ThreadingHTTPServer) -> tuple[str, int]:
    host, port = server.server_address[:2]
    return str(host), int(port)


def origin(server: ThreadingHTTPServer) -> str:
    host, port = host_port(server)
    return f"http://{host}:{port}"


def authorizations(server: Scripted) -> list[str]:
    """The Authorization header of every request, '' where there was none (any case)."""
    return [
        next((v for k, v in headers.items() if k.lower() == "authorization"), "")
        for _m, _p, headers in server.seen
    ]
