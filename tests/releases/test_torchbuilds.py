"""Torch's CUDA builds: from a PyTorch-index-shaped server, from the shipped table when that
index cannot be reached, and the table regenerated from such an index."""

from __future__ import annotations

import json
import os
from pathlib import Path

import loopback
import pytest

from envkit.releases.registry import Scanner
from envkit.releases.torchbuilds import CudaBuilds, main, shipped_table


def page(*wheels: str) -> loopback.Route:
    body = "".join(f'<a href="/files/{w}">{w}</a>\n' for w in wheels).encode()
    return lambda h: h.send(200, body, "text/html")


ROUTES = {
    "/whl/cu118/torch/": page("torch-2.6.0+cu118-cp312-cp312-linux_x86_64.whl"),
    "/whl/cu124/torch/": page(
        "torch-2.6.0+cu124-cp312-cp312-linux_x86_64.whl",
        "torch-2.5.1+cu124-cp312-cp312-linux_x86_64.whl",
    ),
    "/whl/cu126/torch/": page(
        "torch-2.6.0+cu126-cp312-cp312-linux_x86_64.whl",
        "torch-2.7.0.dev20250101+cu126-cp312-cp312-linux_x86_64.whl",
    ),
}


def test_builds_come_from_the_pytorch_index_when_it_answers() -> None:
    with loopback.serve(ROUTES) as server:
        builds = CudaBuilds(
            Scanner("http://127.0.0.1:9/simple"), index=f"{loopback.origin(server)}/whl"
        )
        found = builds.builds("2.6.0")
    assert found.cuda == ("11.8", "12.4", "12.6") and found.source == "the PyTorch index"
    assert found.fitting("12.4") == ("11.8", "12.4")


def test_the_shipped_table_answers_when_the_index_does_not(scan_cache: Path) -> None:
    builds = CudaBuilds(Scanner("http://127.0.0.1:9/simple"), index="http://127.0.0.1:9/whl")
    found = builds.builds("2.6.0")
    assert found.cuda == tuple(shipped_table()["series"]["2.6"])
    assert "envkit's table" in found.source and "unreachable" in found.source


def test_the_table_is_regenerated_from_the_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "torch-cuda.json"
    with loopback.serve(ROUTES) as server:
        assert main(["--index", f"{loopback.origin(server)}/whl", "--out", str(out)]) == 0
    table = json.loads(out.read_text())
    assert table["series"] == {"2.5": ["12.4"], "2.6": ["11.8", "12.4", "12.6"]}  # no dev builds
    assert main(["--index", "http://127.0.0.1:9/whl"]) == 2
    assert "error:" in capsys.readouterr().err


def test_a_series_the_table_lacks_is_read_from_the_default_wheel(
    tmp_path: Path, scan_cache: Path
) -> None:
    """The third source: one build, from ``torch/version.py`` inside the default index's
    wheel (read by range, never installed); a CPU-only wheel or an unreadable index gives none,
    and the answer says which source spoke."""
    import indexserver
    import wheelhouse

    assert "3.1" not in shipped_table()["series"]
    folder = tmp_path / "idx"
    folder.mkdir()
    wheelhouse.torch("3.1.0", cuda="13.2").write(folder)
    wheelhouse.torch("3.2.0", cuda=None).write(folder)
    with indexserver.serve(folder) as server:
        builds = CudaBuilds(Scanner(indexserver.url(server)), index="http://127.0.0.1:9/whl")
        found = builds.builds("3.1.0")
        cpu_only = builds.builds("3.2.0")
    assert found.cuda == ("13.2",) and found.fitting("13.0") == ()
    assert "default index's wheel alone" in found.source and "unreachable" in found.source
    assert cpu_only.cuda == ()
    lost = CudaBuilds(Scanner("http://127.0.0.1:9/simple"), index="http://127.0.0.1:9/whl")
    assert lost.builds("3.1.0").cuda == ()


def test_the_shipped_table_is_well_formed() -> None:
    """Series in order, each a list of CUDA versions oldest first, with where they came from."""
    from packaging.version import Version

    table = shipped_table()
    assert table["source"] and table["generated"]
    series = list(table["series"])
    assert series == sorted(series, key=Version) and "2.10" in series
    for cudas in table["series"].values():
        assert cudas and cudas == sorted(cudas, key=Version)


def test_a_wheel_build_is_kept_under_its_hash(tmp_path: Path, scan_cache: Path) -> None:
    """The lock's check of a torch wheel's build is read once per wheel: kept under the
    wheel's sha256 (the same bytes always give the same answer); a damaged entry is not
    believed."""
    import hashlib

    from envkit.errors import WheelError
    from envkit.io.cache import TORCH_BUILDS
    from envkit.io.http import Http
    from envkit.releases.torchbuilds import wheel_cuda

    import wheelhouse

    wheel = wheelhouse.torch("2.6.0", cuda="12.4").write(tmp_path)
    sha256 = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert wheel_cuda(wheel.as_uri(), Http(), sha256) == "12.4"
    kept = TORCH_BUILDS.path(sha256)
    assert kept == scan_cache / "torch-builds" / f"{sha256}.json"  # the name it always had
    assert json.loads(kept.read_text()) == {"cuda": "12.4"}
    url = wheel.as_uri()
    wheel.unlink()
    assert wheel_cuda(url, Http(), sha256) == "12.4"  # from the cache: the file is gone
    kept.write_text('{"cuda": "12.4; rm -rf /"}')
    with pytest.raises(WheelError):  # not believed: read again from the (gone) wheel
        wheel_cuda(url, Http(), sha256)
    assert not kept.exists()  # and the bad entry is gone


@pytest.mark.parametrize("said", ["twelve", "12.4; x", "1" * 60])
def test_a_torch_version_file_that_names_no_cuda_version_is_refused(
    tmp_path: Path, scan_cache: Path, said: str
) -> None:
    from envkit.errors import WheelError
    from envkit.io.http import Http
    from envkit.releases.torchbuilds import wheel_cuda

    import wheelhouse

    wheel = wheelhouse.torch("2.6.0", cuda=said).write(tmp_path)
    with pytest.raises(WheelError, match="not a version"):
        wheel_cuda(wheel.as_uri(), Http())


def test_torch_version_py_has_one_reader_for_a_wheel_and_an_installed_torch(
    tmp_path: Path,
) -> None:
    """``torch/version.py`` is read with ast by releases.torchversion.read_version_file, for a
    wheel's member and for the file an installed torch holds (gpu.installed.modules)."""
    from envkit.errors import WheelError
    from envkit.gpu.installed.modules import TorchRelease, torch_release
    from envkit.releases.torchversion import VersionFile, read_version_file, version_cuda

    text = (
        "from typing import Optional\n\n__all__ = ['__version__', 'cuda']\n"
        "__version__ = '2.6.0+cu124'\ndebug = False\ncuda: Optional[str] = '12.4'\n"
        "hip: Optional[str] = None\n"
    )
    assert read_version_file(text, "w") == VersionFile("2.6.0+cu124", "12.4")
    assert read_version_file("cuda = None\n", "w") == VersionFile("", "")
    assert version_cuda({"torch/version.py": text.encode()}, "w") == "12.4"
    for bad in ("cuda = '12.x'\n", "cuda = (\n"):
        with pytest.raises(WheelError):
            read_version_file(bad, "w")
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "version.py").write_text(text)
    assert torch_release(tmp_path) == TorchRelease("2.6.0+cu124", "12.4")
    (tmp_path / "torch" / "version.py").write_text("cuda = '12.x'\n")
    assert torch_release(tmp_path) == TorchRelease("", "")
    (tmp_path / "torch" / "version.py").unlink()
    os.mkfifo(tmp_path / "torch" / "version.py")  # refused at once, never waited on
    assert torch_release(tmp_path) == TorchRelease("", "")
