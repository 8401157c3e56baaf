"""io.http and io.inflate: an answer's Content-Encoding, stacked or not, is undone within the
same byte cap as the body, against real loopback servers (issue 27: a 13 KB ``gzip, gzip``
answer took envkit past 1 GB)."""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import bombs
import loopback
import pytest
from bounded import bounded_cases
from hypothesis import given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.errors import NetworkError, TooLarge
from envkit.io import inflate
from envkit.io.http import Http

from helpers import output

GIB_OF_ZEROS = bombs.gzip_zeros(520_000)  # 6.8 MB of gzip that inflate to 1.07 GB


def _deflate(data: bytes, raw: bool) -> bytes:
    squeeze = zlib.compressobj(6, zlib.DEFLATED, -15 if raw else 15)
    return squeeze.compress(data) + squeeze.flush()


ENCODERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "deflate": lambda data: _deflate(data, raw=False),
    "raw-deflate": lambda data: _deflate(data, raw=True),  # sent as "deflate" by some servers
}


def _encoded(data: bytes, stack: list[str]) -> tuple[bytes, str]:
    for name in stack:
        data = ENCODERS[name](data)
    return data, ", ".join("deflate" if n == "raw-deflate" else n for n in stack)


def _pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)] or [b""]


@settings(max_examples=examples(60), deadline=None)
@given(
    data=st.binary(max_size=3000) | st.builds(lambda n: b"ab" * n, st.integers(0, 200_000)),
    stack=st.lists(st.sampled_from(sorted(ENCODERS)), max_size=3),
    size=st.integers(1, 70_000),
)
def test_any_stack_of_encodings_decodes_to_the_body(
    data: bytes, stack: list[str], size: int
) -> None:
    stages = [data]  # what each layer gives when undone, the body last
    for name in stack[:-1]:
        stages.append(ENCODERS[name](stages[-1]))
    sent, header = _encoded(data, stack)
    cap = max(len(stage) for stage in stages)  # every layer's output within the cap
    assert b"".join(inflate.decoded(_pieces(sent, size), header, cap)) == data
    if stack and cap:  # one byte less: refused, never cut
        with pytest.raises(inflate.Inflated):
            b"".join(inflate.decoded(_pieces(sent, size), header, cap - 1))


def test_every_layer_counts_against_the_cap_and_no_piece_is_large() -> None:
    """The outer layer alone makes 6.8 MB (the inner gzip): a 1 MiB cap stops it there."""
    sent = gzip.compress(GIB_OF_ZEROS, 9)
    assert len(sent) < 20_000
    largest, made = 0, 0
    with pytest.raises(inflate.Inflated):
        for piece in inflate.decoded([sent], "gzip, gzip", 1024 * 1024):
            largest, made = max(largest, len(piece)), made + len(piece)
    assert largest <= inflate.PIECE and made <= 1024 * 1024


@pytest.mark.parametrize(
    ("header", "why"),
    [
        ("br", "the encoding 'br'"),
        ("gzip, zstd", "the encoding 'zstd'"),
        ("gzip, gzip, gzip, gzip, gzip", "5 stacked encodings"),
    ],
)
def test_unknown_encodings_and_deep_stacks_are_refused_unread(header: str, why: str) -> None:
    with pytest.raises(inflate.Undecodable, match=why):
        inflate.decoded(iter(()), header, 100)


def test_a_body_that_is_not_what_its_encoding_says_is_refused() -> None:
    with pytest.raises(inflate.Undecodable, match="not valid gzip"):
        b"".join(inflate.decoded([b"plain text, not gzip"], "gzip", 100))


def _serving(body: bytes, encoding: str) -> loopback.Route:
    return lambda handler: handler.send(200, body, headers={"Content-Encoding": encoding})


def test_a_stacked_answer_is_decoded_and_envkit_asks_only_for_what_it_decodes() -> None:
    answer = json.dumps({"data": [{"id": "m" * 5000}]}).encode()
    sent, header = _encoded(answer, ["gzip", "raw-deflate", "gzip"])
    with loopback.serve({"/a": _serving(sent, header)}) as server:
        got = Http().request("GET", loopback.origin(server) + "/a")
    assert got.body == answer
    assert server.seen[0][2]["Accept-Encoding"] == "gzip, deflate"


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_a_gzip_bomb_of_any_depth_is_the_cap_error(layers: int) -> None:
    sent = GIB_OF_ZEROS
    for _ in range(layers - 1):
        sent = gzip.compress(sent, 9)
    cap = "larger than envkit reads \\(1,048,576 bytes\\)"
    with (
        loopback.serve({"/b": _serving(sent, ", ".join(["gzip"] * layers))}) as server,
        pytest.raises(TooLarge, match=cap),
    ):
        Http(max_bytes=1024 * 1024).request("GET", loopback.origin(server) + "/b")


def test_an_unknown_encoding_is_one_network_error_naming_it() -> None:
    with (
        loopback.serve({"/c": _serving(b"\x00" * 10, "br")}) as server,
        pytest.raises(NetworkError, match="sent the encoding 'br'") as caught,
    ):
        Http().request("GET", loopback.origin(server) + "/c")
    assert caught.value.kind == "bad-answer"


def test_probe_against_a_stacked_gzip_bomb_stays_within_memory(tmp_path: Path) -> None:
    """The real CLI in a child limited to bounded.LIMIT_MB: before the fix the inner layer
    inflated whole (1 GB) and the child ran out of memory; now each answer is the cap error
    and the JSON parses."""
    sent = gzip.compress(GIB_OF_ZEROS, 9)
    with loopback.serve({"*": _serving(sent, "gzip, gzip")}) as server:
        base = loopback.origin(server) + "/v1"
        [(res, _seconds)] = bounded_cases([(tmp_path, ["probe", base, "--json"])])
    assert res.code == 1, res.err
    tried = output("probe", res.out)["tried"]
    assert tried and all("larger than envkit reads" in t["problem"] for t in tried)


def test_a_consumer_takes_the_body_as_it_comes_and_ends_the_exchange() -> None:
    """With ``consume``, a 200's body goes to it in pieces, unkept, and what it leaves unread
    is never read; any other status's body is the answer's, as without it; the cap holds."""
    body = os.urandom(8 * 1024 * 1024)
    taken: list[bytes] = []

    def two(pieces: Iterator[bytes]) -> None:
        taken.extend([next(pieces), next(pieces)])

    routes: dict[str, loopback.Route] = {
        "/big": lambda h: h.send(200, body, "application/octet-stream"),
        "/gone": lambda h: h.send(404, b"no such file"),
    }
    with loopback.serve(routes) as server:
        http = Http()
        answer = http.request("GET", loopback.origin(server) + "/big", consume=two)
        assert answer.status == 200 and answer.body == b""
        assert b"".join(taken) == body[: sum(map(len, taken))]
        assert http.traffic.bytes < len(body) // 8  # two pieces' worth, not the body
        gone = http.request("GET", loopback.origin(server) + "/gone", consume=two)
        assert (gone.status, gone.body, len(taken)) == (404, b"no such file", 2)
        with pytest.raises(TooLarge, match="larger than envkit reads"):
            http.request("GET", loopback.origin(server) + "/big", max_bytes=1024, consume=list)


# a new interpreter: the request is this process's first, httpx not yet imported
_FIRST_REQUEST = """
import importlib.util, json, sys
sys.path.insert(0, sys.argv[2])
import loopback
from envkit.io.http import Http

with loopback.serve({"/": lambda h: h.send(200, b"ok")}) as server:
    answer = Http().request("GET", loopback.origin(server) + "/")
loaded = {name: name in sys.modules for name in ("httpx", "httpcore", "trio", "httpx._main")}
installed = importlib.util.find_spec("trio") is not None
if installed:
    import trio  # importable again, as before
print(json.dumps({"body": answer.body.decode(), "loaded": loaded, "trio": installed}))
"""


def test_the_first_request_loads_httpx_without_what_envkit_never_uses() -> None:
    """httpcore's trio backend (trio, attrs, sortedcontainers: loaded whenever trio is
    installed) and httpx's own command line (pygments) are not imported for a request, and
    stay importable."""
    import subprocess
    import sys

    tests = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run(
        [sys.executable, "-c", _FIRST_REQUEST, "", tests],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    found = json.loads(done.stdout)
    assert found["body"] == "ok"
    assert found["loaded"] == {"httpx": True, "httpcore": True, "trio": False, "httpx._main": False}
