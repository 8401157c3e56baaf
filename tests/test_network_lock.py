"""Locking the real vllm-0.8.5+qwen2-vl cells. Run with ``python -m pytest -m network``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envkit.lockcells import body

from helpers import envkit

ROOT = Path(__file__).resolve().parent.parent
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
    assert states["py3.12-linux-aarch64-cu124"] == "source-only"  # vllm 0.8.5: x86_64 wheel only
    fresh = tmp_path / "constraints" / PROFILE / "py3.12-linux-x86_64-cu124.txt"
    text = fresh.read_text()
    assert "transformers==4.51.3 \\" in text and "--hash=sha256:" in text
    assert "torch==2.6.0 \\" in text
    # the same profile, resolved afresh from the index, gives the published bytes
    for cell in states:
        published = ROOT / "constraints" / PROFILE / f"{cell}.txt"
        assert body(published) == body(tmp_path / "constraints" / PROFILE / f"{cell}.txt"), cell
