"""The index session: its client and its pages reader are made on first use, once, and
each project's page is read once."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from packaging.version import Version

from envkit.errors import WheelError
from envkit.index.session import IndexSession
from envkit.io.http import Http

import indexserver


def test_a_session_makes_no_client_and_reads_no_page_module_until_asked() -> None:
    check = """
import sys
from envkit.index.session import IndexSession
session = IndexSession("https://index.invalid/simple")
assert session.index == "https://index.invalid/simple"
assert not {"envkit.io.http", "envkit.index.pages", "httpx"} & set(sys.modules)
session.http
assert "envkit.io.http" in sys.modules
"""
    subprocess.run([sys.executable, "-c", check], check=True, timeout=60)


def test_threads_asking_at_once_share_one_client() -> None:
    session = IndexSession("https://index.invalid/simple")
    with ThreadPoolExecutor(8) as pool:
        clients = list(pool.map(lambda _n: session.http, range(64)))
    assert len({id(c) for c in clients}) == 1 and isinstance(clients[0], Http)


def test_a_client_given_is_the_one_used() -> None:
    given = Http()
    assert IndexSession("https://index.invalid/simple", http=given).http is given


def test_the_wheels_and_the_sdists_of_a_project_come_from_one_read_of_its_page(
    tmp_path: Path,
) -> None:
    for name in ("demo-1.0-py3-none-any.whl", "demo-1.0.tar.gz", "demo-2.0.tar.gz", "demo.zip"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "other-1.0.tar.gz").write_bytes(b"x")
    with indexserver.serve(tmp_path) as server:
        session = IndexSession(indexserver.url(server))
        assert [f.filename for f in session.files("demo")] == ["demo-1.0-py3-none-any.whl"]
        assert sorted(map(str, session.sdists("demo"))) == ["1.0", "2.0"]
        assert session.files("demo") and session.sdists("Demo".lower())
        assert server.paths == ["/simple/demo/"]
        other = IndexSession(indexserver.url(server))  # the sdists asked first
        assert list(other.sdists("other")) and other.files("other") == []
        assert server.paths == ["/simple/demo/", "/simple/other/"]
        assert other.listings()["other"].sdists and "demo" not in other.listings()


def test_a_release_without_a_wheel_is_one_message_naming_the_project_and_the_newest(
    tmp_path: Path,
) -> None:
    for name in ("demo-1.0-py3-none-any.whl", "demo-2.0.tar.gz", "demo-3.0rc1-py3-none-any.whl"):
        (tmp_path / name).write_bytes(b"x")
    with indexserver.serve(tmp_path) as server:
        session = IndexSession(indexserver.url(server))
        assert session.pick("demo", Version("1.0")).filename == "demo-1.0-py3-none-any.whl"
        with pytest.raises(WheelError) as refused:
            session.pick("demo", Version("2.0"))  # an sdist alone: no wheel to read
    assert refused.value.message == (
        f"demo 2.0: the index {indexserver.url(server)} lists no wheel of it (its newest "
        "release with a wheel is 1.0)."
    )
    assert refused.value.hint == "Give a release the index publishes, such as demo==1.0."
