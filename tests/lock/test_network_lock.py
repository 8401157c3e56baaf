"""Locking the real vllm-0.8.5+qwen2-vl cells. Run with ``python -m pytest -m network``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envkit.lock.cells import body

from helpers import ROOT, envkit

PROFILE = "vllm-0.8.5+qwen2-vl"
pytestmark = pytest.mark.network


def test_real_cells_match_the_published_ones(tmp_path: Path) -> None:
    (tmp_path / "envs").mkdir()
    shutil.copy(ROOT / "envs" / f"{PROFILE}.toml", tmp_path / "envs")
    res = envkit(
        "lock",
        PROFILE,
        "--torch-index",
        "default",
        "--refresh",
        "--json",
        "--constraints",
        str(tmp_path / "constraints"),
        cwd=tmp_path,
    )
    assert res.code == 0, res.err[-2000:]
    states = {c["cell"]: c["state"] for c in res.json()["cells"]}
    assert states["py3.12-linux-x86_64-cu124"] == "locked"
    assert set(states) == {"py3.12-linux-x86_64-cu124", "py3.11-linux-x86_64-cu124"}
    fresh = tmp_path / "constraints" / PROFILE / "py3.12-linux-x86_64-cu124.txt"
    text = fresh.read_text()
    assert "transformers==4.51.3 \\" in text and "--hash=sha256:" in text
    assert "torch==2.6.0 \\" in text
    # the same profile, resolved afresh from the index, gives the published bytes
    for cell in states:
        published = ROOT / "constraints" / PROFILE / f"{cell}.txt"
        assert body(published) == body(tmp_path / "constraints" / PROFILE / f"{cell}.txt"), cell


def test_the_default_index_aarch64_torch_is_refused_in_a_cuda_cell(tmp_path: Path) -> None:
    """torch 2.6.0's aarch64 wheel on the default index is CPU-only: a cu124 aarch64 cell
    locked from there is refused, naming it, and nothing is written."""
    (tmp_path / "envs").mkdir()
    text = (ROOT / "envs" / f"{PROFILE}.toml").read_text()
    wider = text.replace('platforms = ["linux-x86_64"]', 'platforms = ["linux-aarch64"]')
    assert wider != text
    (tmp_path / "envs" / f"{PROFILE}.toml").write_text(wider)
    cell = "py3.12-linux-aarch64-cu124"
    res = envkit(
        "lock", PROFILE, "--cell", cell, "--torch-index", "default", "--json", cwd=tmp_path
    )
    assert res.code == 1, res.err[-2000:]
    (found,) = res.json()["cells"]
    assert found["state"] == "incompatible"
    assert "torch 2.6.0 for linux-aarch64 is a CPU-only build" in found["reason"]
    assert not list((tmp_path / "constraints" / PROFILE).glob("*aarch64*"))
