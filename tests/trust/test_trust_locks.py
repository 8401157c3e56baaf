"""A network failure is never a verdict; publishing one profile keeps the others; the scan
cache is keyed by the index; a folder that cannot be written is one message."""

from __future__ import annotations

import functools
import json
import shutil
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import indexserver
import registry_world
from conftest import Indexes
from helpers import PY, lock_args, made_once, matrix_profile, profile_text, run_cli


@pytest.fixture(scope="module")
def _locked_once(tmp_path_factory: pytest.TempPathFactory, indexes: Indexes) -> Path:
    """Two profiles locked and published, once a run (helpers.made_once)."""

    def make(root: Path) -> None:
        (root / "envs").mkdir()
        (root / "envs" / "m.toml").write_text(matrix_profile([PY]))
        (root / "envs" / "n.toml").write_text(matrix_profile([PY]).replace("test", "test n"))
        with pytest.MonkeyPatch.context() as patch:
            patch.chdir(root)
            assert run_cli("lock", "--all", *lock_args(indexes)).code == 0
            assert run_cli("publish", "--all").code == 0

    return made_once(tmp_path_factory, "locked-trust", make)


@pytest.fixture
def locked(tmp_path: Path, _locked_once: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two profiles, both locked and published: locked once for the module and copied for
    each test (a lock writes the same bytes each time, tests/lock/test_lock.py)."""
    shutil.copytree(_locked_once, tmp_path, dirs_exist_ok=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_an_unreachable_torch_index_changes_nothing(locked: Path, indexes: Indexes) -> None:
    before = snapshot(locked / "constraints")
    profile = locked / "envs" / "m.toml"
    profile.write_text(profile.read_text() + "# edited: every cell of m is stale now\n")
    res = run_cli(
        "lock", "m", "--index-url", indexes.default,
        "--torch-index", "http://127.0.0.1:9/whl/{backend}", "--json",
    )  # fmt: skip
    assert res.code == 2, res.err
    cells = json.loads(res.out)["cells"]
    assert {c["state"] for c in cells} == {"unreachable"}
    assert all("Cannot reach http://127.0.0.1:9/whl/cu124" in c["reason"] for c in cells)
    assert snapshot(locked / "constraints") == before  # no file, no lock.json entry replaced
    check = run_cli("lock", "--all", "--check")
    assert check.code == 1 and "stale" in check.out  # the edit, not the network, is reported


def test_check_fails_while_a_cell_is_recorded_unresolvable(locked: Path) -> None:
    manifest = locked / "constraints" / "m" / "lock.json"
    data = json.loads(manifest.read_text())
    cell = next(iter(data["cells"]))
    data["cells"][cell]["state"] = "unresolvable"
    data["cells"][cell]["reason"] = "no solution"
    manifest.write_text(json.dumps(data))
    res = run_cli("lock", "--all", "--check")
    assert res.code == 1 and "unresolvable" in res.out


def test_publishing_one_profile_keeps_the_others(locked: Path) -> None:
    index = locked / "constraints" / "index.json"
    before = json.loads(index.read_text())["files"]
    assert {e["profile"] for e in before} == {"m", "n"}
    assert run_cli("publish", "m").code == 0
    after = json.loads(index.read_text())["files"]
    assert after == before
    index.write_text("{not json")
    res = run_cli("publish", "m")
    assert res.code == 2 and "is not an index.json written by envkit" in res.err


def test_a_folder_that_cannot_be_written_is_one_message(locked: Path, indexes: Indexes) -> None:
    shutil.rmtree(locked / "constraints" / "n")
    (locked / "constraints" / "n").write_text("a file where a folder belongs\n")
    profile = locked / "envs" / "n.toml"
    profile.write_text(profile.read_text() + "# edited\n")
    res = run_cli("lock", "n", "--cell", f"py{PY}-linux-x86_64-cu124", *lock_args(indexes))
    assert res.code == 2, res.err
    assert "error: Cannot create" in res.err and "constraints/n" in res.err
    assert "Traceback" not in res.err


def test_scan_cache_is_keyed_by_index(
    tmp_path: Path, scan_cache: Path, world: indexserver.Server
) -> None:
    first = run_cli("scan", "transformers==4.51.3", "--json", "--index-url", indexserver.url(world))
    assert first.code == 0 and json.loads(first.out)["cached"] is False
    again = run_cli("scan", "transformers==4.51.3", "--json", "--index-url", indexserver.url(world))
    assert json.loads(again.out)["cached"] is True
    other = tmp_path / "other"
    other.mkdir()
    for wheel in registry_world.wheels():
        if wheel.name == "transformers" and wheel.version == "4.51.3":
            wheel.write(other)
    with indexserver.serve(other) as server:
        elsewhere = run_cli(
            "scan", "transformers==4.51.3", "--json", "--index-url", indexserver.url(server)
        )
    assert elsewhere.code == 0 and json.loads(elsewhere.out)["cached"] is False


@pytest.fixture
def served_index(indexes: Indexes) -> Iterator[str]:
    """The tests' default index served over HTTP on 127.0.0.1 (it ignores credentials)."""
    folder = Path(indexes.default.removeprefix("file://")).parent
    handler = functools.partial(QuietFiles, directory=str(folder))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()


class QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def test_index_credentials_reach_no_file_or_output(
    tmp_path: Path, served_index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "s3cret-index-t0ken"
    index = served_index.replace("http://", f"http://:{token}@")
    (tmp_path / "envs").mkdir()
    # one cell: every kind of file a lock writes (its .txt, its pylock, lock.json) is there
    one = matrix_profile([PY]).replace('"linux-x86_64", "linux-aarch64"', '"linux-x86_64"')
    (tmp_path / "envs" / "m.toml").write_text(one)
    monkeypatch.chdir(tmp_path)
    outputs = []
    for extra in ((), ("--json",)):
        res = run_cli("lock", "m", "--index-url", index, "--torch-index", "default", *extra)
        res.assert_ok()
        outputs.append(res.out + res.err)
    # resolved again, through the same index: current (its pylock's header masks the token)
    check = run_cli("lock", "m", "--check", "--resolve", "--index-url", index, "--json")
    check.assert_ok()
    outputs.append(check.out + check.err)
    (tmp_path / "envs" / "b.toml").write_text(profile_text())
    build = run_cli(
        "build", "b", "--index-url", index, "--torch-index", "default", "--no-lock",
        "--python", sys.executable, "--json",
    )  # fmt: skip
    build.assert_ok()
    outputs.append(build.out + build.err)
    assert all(token not in text for text in outputs)
    written = [p for p in (tmp_path / "constraints").rglob("*") if p.is_file()]
    written.append(tmp_path / ".venv" / "envkit-build.json")
    cell = f"py{PY}-linux-x86_64-cu124"
    pylock = f"pylock.{cell.replace('.', '')}.toml"
    assert {f"{cell}.txt", pylock, "lock.json", "envkit-build.json"} <= {p.name for p in written}
    for path in written:
        assert token not in path.read_text(), path
    header = (tmp_path / "constraints" / "m" / f"py{PY}-linux-x86_64-cu124.txt").read_text()
    assert "index: http://***@127.0.0.1" in header
