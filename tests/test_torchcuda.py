"""Torch's CUDA builds: from a PyTorch-index-shaped server, from the shipped table when that
index cannot be reached, and the table regenerated from such an index."""

from __future__ import annotations

import json
from pathlib import Path

import loopback
import pytest

from envkit.registry_scan import Scanner
from envkit.torchcuda import CudaBuilds, main, shipped_table


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
