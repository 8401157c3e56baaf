"""A package index on 127.0.0.1 for the scanner tests: PEP 691 JSON pages, and wheel files
served with HTTP range requests (like the real index), with a count of bytes sent; and the
PyTorch index's per-backend pages (``/whl/cu124/torch/``) for its local-version torch wheels."""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote, unquote

from packaging.utils import canonicalize_name, parse_wheel_filename


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, *args: object) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        # headers and body leave in separate writes: without this, each answer waits out
        # the client's delayed ACK (40 ms)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        self.server.paths.append(self.path)
        if self.server.status:
            self.send_error(self.server.status)
            return
        if self.path.rstrip("/") == "/simple":
            self._root()
        elif self.path.startswith("/simple/"):
            self._project(self.path.strip("/").split("/")[1])
        elif self.path.startswith("/files/"):
            self._file(self.server.root / unquote(self.path.split("/", 2)[2]))
        elif match := re.fullmatch(r"/whl/(cu[0-9]+)/torch/?", self.path):
            self._backend(match.group(1))
        else:
            self.send_error(404)

    def _backend(self, tag: str) -> None:
        """A PyTorch-index page (PEP 503 HTML): the torch wheels of one CUDA backend, their
        ``+`` quoted and their sha256 in the fragment, as that index lists them."""
        wheels = sorted(p for p in self.server.root.glob(f"torch-*+{tag}-*.whl"))
        if not wheels:
            self.send_error(404)
            return
        links = "".join(
            f'<a href="/files/{quote(p.name)}#sha256={hashlib.sha256(p.read_bytes()).hexdigest()}">'
            f"{p.name}</a>\n"
            for p in wheels
        )
        body = f"<html><body>\n{links}</body></html>\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_HEAD(self) -> None:  # uv asks a file's size before reading its metadata by range
        path = self.server.root / self.path.split("/", 2)[-1]
        if not self.path.startswith("/files/") or not path.is_file() or self.server.status:
            self.send_error(self.server.status or 404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(path.stat().st_size))
        if self.server.ranges:
            self.send_header("Accept-Ranges", "bytes")
        self.end_headers()

    def _root(self) -> None:
        names = sorted({_project_of(p.name) for p in self.server.root.iterdir()} - {""})
        projects = [{"name": name} for name in names]
        self._json({"meta": {"api-version": "1.1"}, "projects": projects})

    def _json(self, data: object) -> None:
        body = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _project(self, name: str) -> None:
        files = [
            {
                "filename": p.name,
                "url": f"/files/{p.name}",
                "size": p.stat().st_size,
                "hashes": {"sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
                if self.server.hashes
                else {},
                "upload-time": self.server.upload_times.get(p.name, "2025-01-01T00:00:00Z"),
            }
            for p in sorted(self.server.root.iterdir())
            if _project_of(p.name) == canonicalize_name(name)
        ]
        if not files:
            self.send_error(404)
            return
        self._json({"meta": {"api-version": "1.1"}, "name": name, "files": files})

    def _file(self, path: Path) -> None:
        if not path.is_file():
            self.send_error(404)
            return
        data = path.read_bytes()
        match = re.fullmatch(r"bytes=(-?\d+)-?(\d*)", self.headers.get("Range", ""))
        if match and self.server.ranges:
            first, last = match.groups()
            start = int(first)
            if start < 0:
                start, end = max(0, len(data) + start), len(data) - 1
            else:
                end = min(int(last), len(data) - 1) if last else len(data) - 1
            chunk = data[start : end + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        else:
            chunk = data
            self.send_response(200)
        self.send_header("Content-Length", str(len(chunk)))
        self.end_headers()
        self.wfile.write(chunk)
        self.server.sent += len(chunk)


def _project_of(filename: str) -> str:
    if filename.endswith(".whl"):
        return canonicalize_name(parse_wheel_filename(filename)[0])
    if filename.endswith(".tar.gz"):
        return canonicalize_name(filename[: -len(".tar.gz")].rpartition("-")[0])
    return ""


class _Server(ThreadingHTTPServer):
    root: Path
    paths: list[str]
    sent: int
    ranges: bool
    status: int
    upload_times: dict[str, str]
    hashes: bool  # sha256 in the pages, as the real index gives them (uv then needs no download)

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that read what it needed (an sdist up to its test files) hung up


@contextmanager
def serve(root: Path, *, ranges: bool = True) -> Iterator[_Server]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.root, server.paths, server.sent = root, [], 0
    server.ranges, server.status, server.upload_times = ranges, 0, {}
    server.hashes = False
    thread = threading.Thread(target=server.serve_forever, args=(0.005,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


Server = _Server


def url(server: _Server) -> str:
    host, port = server.server_address[:2]
    return f"http://{host!s}:{port}/simple"
