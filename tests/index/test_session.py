"""The index session: its client and its pages reader are made on first use, once."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from envkit.index.session import IndexSession
from envkit.io.http import Http


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
