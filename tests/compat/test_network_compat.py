"""compat against the real package index. Run with ``python -m pytest -m network``."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.profiles.catalog import Catalog

from helpers import ROOT, run_cli

pytestmark = pytest.mark.network


def test_report_1_pair_names_the_tokenizer_attribute(tmp_path: Path, scan_cache: Path) -> None:
    res = run_cli("compat", "vllm==0.8.5", "transformers==5.0.0", "--json", "--no-cache")
    assert res.code == 1, res.err
    data = res.json()
    assert data["reference"] == "4.51.3"
    used = {(f["name"], f["file"]) for f in data["findings"] if not f["architectures"]}
    assert ("all_special_tokens_extended", "vllm/transformers_utils/tokenizer.py") in used
    assert data["cost"]["bytes_read"] < 0.02 * data["cost"]["wheel_bytes"]


@pytest.mark.parametrize(
    "profile", Catalog.from_option(str(ROOT / "envs")).list().profiles, ids=lambda p: p.name
)
def test_every_shipped_profiles_pins_are_compatible(profile, scan_cache: Path) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("--envs", str(ROOT / "envs"), "compat", profile.name, "--json")
    assert res.code == 0, res.out
    data = res.json()
    assert all(f["architectures"] for f in data["findings"])  # only model files, if any
