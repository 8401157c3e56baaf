"""Bounded work: every network read has a deadline and a size cap, wheel members are inflated
as a stream with a cap, and model files are read within depth and size limits."""

from __future__ import annotations

import json
import resource
import struct
import time
import zipfile
import zlib
from pathlib import Path

import loopback
import pytest

import indexserver
from helpers import envkit, run_cli, said
from wheelhouse import Wheel

REGISTRY = "vllm/model_executor/models/registry.py"


def one_wheel_index(tmp_path: Path, wheel: Wheel) -> Path:
    folder = tmp_path / "files"
    folder.mkdir()
    wheel.write(folder)
    return folder


def _zeros_bomb(path: Path, mib: int) -> None:
    """A wheel whose registry member inflates to ``mib`` MiB of zeros, written without
    deflating them: after a full flush, deflate gives the same bytes for each MiB of zeros
    (it starts afresh), so the stream is that segment ``mib`` times; the sizes and CRC in the
    headers are the real ones (zipfile reads the member back below)."""
    deflate = zlib.compressobj(6, zlib.DEFLATED, -15)  # raw deflate, as a zip member holds it
    block = bytes(1 << 20)
    segment = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    assert deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH) == segment
    data = segment * mib + deflate.flush()
    crc = 0
    for _ in range(mib):
        crc = zlib.crc32(block, crc)
    members = [
        (b"vllm-0.8.5.dist-info/METADATA", 0, b"Metadata-Version: 2.1\nName: vllm\n"),
        (REGISTRY.encode(), 8, data),
    ]
    local, central = b"", b""
    for name, method, stored in members:
        size = mib << 20 if method else len(stored)
        check = crc if method else zlib.crc32(stored)
        fields = (method, 0, 0x21, check, len(stored), size, len(name))  # 1980-01-01
        central += struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, *fields, 0, 0, 0, 0, 0,
                               len(local)) + name  # fmt: skip
        local += struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, *fields, 0) + name + stored
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 2, 2, len(central), len(local), 0)
    path.write_bytes(local + central + end)


def test_a_zip_bomb_ends_in_seconds_with_little_memory(tmp_path: Path, scan_cache: Path) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    path = folder / "vllm-0.8.5-py3-none-any.whl"
    _zeros_bomb(path, 256)  # 256 MiB inflated (16 times the cap), about 256 KB zipped
    with zipfile.ZipFile(path) as zf:  # a zip any reader takes, its member the size it says
        assert zf.getinfo(REGISTRY).file_size == 256 << 20
        with zf.open(REGISTRY) as member:
            assert member.read(1 << 20) == bytes(1 << 20)
    with indexserver.serve(folder) as server:
        start = time.monotonic()
        res = envkit("scan", "vllm==0.8.5", "--index-url", indexserver.url(server), cwd=tmp_path)
        took = time.monotonic() - start
        sent = server.sent
    assert res.code == 2, res.err
    assert "inflates to more than" in res.err and "Traceback" not in res.err
    assert took < 20
    assert sent < 1024 * 1024  # the directory only: the member was refused by its size
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert peak_kib < 500 * 1024


def test_a_member_that_lies_about_its_size_is_cut_off(tmp_path: Path, scan_cache: Path) -> None:
    """The directory says 100 bytes; the data inflates far beyond: zipfile stops at the
    stated size and the damage is reported, not read."""
    folder = tmp_path / "files"
    folder.mkdir()
    honest = folder / "honest.zip"
    with zipfile.ZipFile(honest, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("vllm-0.8.5.dist-info/METADATA", "Metadata-Version: 2.1\nName: vllm\n")
        zf.writestr(REGISTRY, b"\0" * (8 << 20))
    data = bytearray(honest.read_bytes())
    info = zipfile.ZipFile(honest).getinfo(REGISTRY)
    # patch the uncompressed size in the local header and in the central directory
    for at in (info.header_offset + 22, _central_entry(data, REGISTRY) + 24):
        data[at : at + 4] = (100).to_bytes(4, "little")
    honest.unlink()
    (folder / "vllm-0.8.5-py3-none-any.whl").write_bytes(bytes(data))
    with indexserver.serve(folder) as server:
        res = run_cli("scan", "vllm==0.8.5", "--index-url", indexserver.url(server))
    assert res.code == 2, res.err
    assert "damaged" in res.err


def _central_entry(data: bytearray, name: str) -> int:
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        n_len = int.from_bytes(data[at + 28 : at + 30], "little")
        if data[at + 46 : at + 46 + n_len] == name.encode():
            return at
        at = data.find(b"PK\x01\x02", at + 4)
    raise AssertionError(name)


def test_corrupt_deflate_data_is_reported(tmp_path: Path, scan_cache: Path) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    path = Wheel("vllm", "0.8.5", {REGISTRY: "_VLLM_MODELS = {'A': ('a', 'A')}\n" * 200}).write(
        folder
    )
    data = bytearray(path.read_bytes())
    info = zipfile.ZipFile(path).getinfo(REGISTRY)
    start = info.header_offset + 30 + len(REGISTRY.encode())
    data[start : start + 40] = b"\xff" * 40
    path.write_bytes(bytes(data))
    with indexserver.serve(folder) as server:
        res = run_cli("scan", "vllm==0.8.5", "--index-url", indexserver.url(server))
    assert res.code == 2, res.err
    assert "damaged" in res.err


def test_a_10_gb_answer_is_refused_before_it_is_read(tmp_path: Path, scan_cache: Path) -> None:
    def huge(handler: loopback.Handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
        handler.send_header("Content-Length", str(10 * 1000**3))
        handler.end_headers()
        handler.wfile.write(b"{" * 65536)

    with loopback.serve({"/simple/vllm/": huge}) as server:
        start = time.monotonic()
        res = run_cli("scan", "vllm==0.8.5", "--index-url", loopback.origin(server) + "/simple")
    assert res.code == 2 and "larger than envkit reads" in res.err
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("where", ["body", "headers"])
def test_a_dripping_server_meets_the_deadline(
    where: str, scan_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVKIT_HTTP_DEADLINE", "0.5")
    page = json.dumps({"files": []}).encode() * 50

    def drip(handler: loopback.Handler) -> None:
        if where == "body":
            head = (
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(page)}\r\n\r\n".encode()
            )
            handler.drip(head, page, 0.1)
        else:
            handler.drip(b"HTTP/1.1 200 OK\r\n", b"X-Slow: " + b"a" * 200 + b"\r\n\r\n", 0.1)

    with loopback.serve({"/simple/vllm/": drip}) as server:
        start = time.monotonic()
        res = run_cli("scan", "vllm==0.8.5", "--index-url", loopback.origin(server) + "/simple")
        took = time.monotonic() - start
    assert res.code == 2, res.err
    assert "no complete answer within 0.5 s" in res.err
    assert took < 5


@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b"[]",
        b'{"files": 3}',
        b'{"files": [{"filename": 5, "url": null}]}',
        b"null",
        b"\xff\xfe",
    ],
)
def test_malformed_index_pages_are_one_message(body: bytes, scan_cache: Path) -> None:
    route = {"/simple/vllm/": lambda h: h.send(200, body, "application/vnd.pypi.simple.v1+json")}
    with loopback.serve(route) as server:
        res = run_cli("scan", "vllm==0.8.5", "--index-url", loopback.origin(server) + "/simple")
    assert res.code == 2, res.err
    # after the step's progress line, one message
    assert said(res.err).startswith("error: ") and said(res.err).count("\n") == 1


def test_an_html_only_index_is_read(
    tmp_path: Path, scan_cache: Path, world: indexserver.Server
) -> None:
    """PEP 503 HTML pages work as well as PEP 691 JSON ones."""
    target = indexserver.url(world)

    def html(handler: loopback.Handler) -> None:
        import urllib.request

        with urllib.request.urlopen(
            urllib.request.Request(
                target + "/transformers/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
            )
        ) as answer:
            files = json.loads(answer.read())["files"]
        base = target.rsplit("/simple", 1)[0]
        links = "".join(f'<a href="{base}{f["url"]}">{f["filename"]}</a>\n' for f in files)
        handler.send(200, f"<html><body>{links}</body></html>".encode(), "text/html")

    with loopback.serve({"/simple/transformers/": html}) as server:
        res = run_cli(
            "scan",
            "transformers==4.51.3",
            "--index-url",
            loopback.origin(server) + "/simple",
            "--json",
        )
    res.assert_ok()
    assert "qwen2_vl" in json.loads(res.out)["model_types"]


def test_deep_and_non_json_model_files(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    model = project / "model"
    model.mkdir()
    cases = {
        "[" * 50_000 + "]" * 50_000: "nested too deeply",
        '{"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "x": NaN}': "NaN",
        '{"model_type": "qwen2", "num_hidden_layers": Infinity}': "Infinity",
    }
    for text, expected in cases.items():
        (model / "config.json").write_text(text)
        commands: list[tuple[str, ...]] = [
            ("check-model", "good", str(model)),
            ("plan", "good", str(model), "--gpu-memory", "24GiB"),
        ]
        for command in commands:
            res = run_cli(*command)
            assert res.code == 2, (command, res.err)
            assert expected in res.err
