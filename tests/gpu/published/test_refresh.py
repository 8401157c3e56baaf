"""envkit refresh against a served index that gains a release: exactly that release is read
into the kernel table (its registry into the cache), nothing already known is fetched again,
a second refresh finds nothing new and writes nothing, and without --out the table goes to
the user's data folder, which every lookup then reads."""

from __future__ import annotations

from pathlib import Path

import layouts
import pytest

from envkit.gpu.published import kerneltable, kernelupdate

import elfbuild
import indexserver
import kernelwheels
from helpers import envkit, output


def _with_registry(version: str, folder: Path) -> None:
    """A vLLM wheel with kernels and a model registry (so its scan is cached)."""
    built = kernelwheels.modules()
    files: dict[str, bytes] = {
        "vllm/_C.abi3.so": built["_C"],
        **{k: v.encode() for k, v in layouts.vllm_085().files.items() if isinstance(v, str)},
    }
    kernelwheels.vllm(folder, version, files)


def _fetched(server: indexserver.Server, since: int) -> list[str]:
    return [p for p in server.paths[since:] if p.startswith("/files/")]


@elfbuild.needs_cxx
def test_refresh_reads_only_the_release_the_index_gained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "index"
    folder.mkdir()
    kernelwheels.vllm(folder, "0.8.5")
    kernelwheels.torch(folder, "2.6.0", "12.4")
    out = tmp_path / "gpu-kernels.json"
    with indexserver.serve(folder) as server:
        server.hashes = True
        url = indexserver.url(server)
        assert kernelupdate.main(["--out", str(out), "--index-url", url]) == 0  # the maintainer's
        before = kerneltable.load(out.read_text())

        _with_registry("0.9.0", folder)  # the index gains a release (pinning torch 2.6.0)
        since = len(server.paths)
        res = envkit("refresh", "--out", str(out), "--index-url", url, "--json", cwd=tmp_path)
        assert res.code == 0, res.err
        data = output("refresh", res.out)
        assert data["new_vllm"] == ["0.9.0"] and data["new_torch"] == [] and data["written"]
        assert data["releases"] == 2 and data["changed"] is True
        assert "vllm 0.9.0 registry" in data["cached"]
        fetched = _fetched(server, since)
        assert fetched and all("vllm-0.9.0" in p for p in fetched)  # 0.8.5, torch: kept
        table = kerneltable.load(out.read_text())
        assert [b.version for b in table.vllm] == ["0.8.5", "0.9.0"]
        assert table.vllm[0] == before.vllm[0] and table.torch == before.torch
        build = table.vllm_build("0.9.0")
        assert build is not None and build.torch == "2.6.0"

        # again: nothing new, nothing fetched, nothing written
        since, written = len(server.paths), out.stat().st_mtime_ns
        again = envkit("refresh", "--out", str(out), "--index-url", url, cwd=tmp_path)
        assert again.code == 0
        assert "nothing new: the kernel table holds every vLLM release" in again.out
        assert _fetched(server, since) == [] and out.stat().st_mtime_ns == written


@elfbuild.needs_cxx
def test_without_out_the_users_table_is_written_and_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    folder = tmp_path / "index"
    folder.mkdir()
    kernelwheels.vllm(folder, "0.8.5")  # in envkit's own table: not new
    kernelwheels.torch(folder, "2.6.0", "12.4")
    _with_registry("9.0.0", folder)  # new
    assert kerneltable.vllm_build("9.0.0") is None
    with indexserver.serve(folder) as server:
        server.hashes = True
        res = envkit("--wide", "refresh", "--index-url", indexserver.url(server), cwd=tmp_path)
    assert res.code == 0, res.err
    assert "new: vLLM 9.0.0 (linux-x86_64) in the kernel table" in res.out
    written = tmp_path / "data" / "envkit" / "gpu-kernels.json"
    assert f"wrote {written}" in res.out
    assert kerneltable.vllm_build("9.0.0") is not None  # every lookup reads it now
    assert kerneltable.vllm_build("0.8.5") == kerneltable.packaged().vllm_build("0.8.5")
    written.write_text("{not json")  # a broken copy: envkit's own again
    assert kerneltable.vllm_build("9.0.0") is None


def test_an_index_that_does_not_answer_is_exit_2(tmp_path: Path) -> None:
    out = tmp_path / "gpu-kernels.json"
    res = envkit(
        "refresh", "--out", str(out), "--index-url", "http://127.0.0.1:9/simple", cwd=tmp_path
    )
    assert res.code == 2 and not out.exists()
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    res = envkit(
        "refresh", "--out", str(bad), "--index-url", "http://127.0.0.1:9/simple", cwd=tmp_path
    )
    assert res.code == 2 and "not one envkit writes" in res.err
