"""envkit lint against the real vLLM 0.8.5 and 0.33.0 wheels on the package index. Run with
``python -m pytest -m network``. Run time (benchmarks/serve_flags_runtime.py) found both
releases' installed parsers accepting --disable-log-requests (0.33.0: as the inverse of
--enable-log-requests), and only 0.8.5 --enable-reasoning."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.index.session import IndexSession
from envkit.io.urls import index_url
from envkit.profiles.catalog import Catalog
from envkit.serving.lint.check import lint_args

from helpers import ROOT

pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def session() -> IndexSession:
    return IndexSession(index_url(), use_cache=False)


def _profile(name: str):  # type: ignore[no-untyped-def]
    return Catalog.from_option(str(ROOT / "envs")).resolve(name)


def test_vllm_085_accepts_them(session: IndexSession) -> None:
    args = ["m", "--enable-reasoning", "--disable-log-requests", "--max-model-len", "8192"]
    report = lint_args(_profile("vllm-0.8.5+qwen2-vl"), args, session=session)
    assert report.vllm == "0.8.5" and report.ok and report.findings == ()


def test_vllm_0330_refuses_enable_reasoning(session: IndexSession, tmp_path: Path) -> None:
    args = ["m", "--enable-reasoning", "--disable-log-requests", "--max-model-len", "8192"]
    report = lint_args(_profile("vllm-0.33.0"), args, session=session)
    by = {f.subject: f for f in report.findings}
    assert set(by) == {"--enable-reasoning"}
    finding = by["--enable-reasoning"]
    assert finding.code == "renamed-flag" and "--reasoning-parser" in finding.fix
    assert "0.9.2 was the last release" in finding.message
    assert not report.ok
