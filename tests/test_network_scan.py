"""Scans against the real package index. Run with ``python -m pytest -m network``."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from envkit.catalog import list_profiles
from envkit.registry_scan import Scanner, releases_listing
from envkit.wheelfetch import index_url

from helpers import envkit

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def scanner() -> Scanner:
    return Scanner(index_url(), use_cache=False)


def test_vllm_085_scan_reads_under_one_percent(tmp_path: Path):
    res = envkit("scan", "vllm==0.8.5", "--no-cache", "--json", cwd=tmp_path)
    assert res.code == 0, res.err
    data = res.json()
    assert len(data["architectures"]) == 146
    assert data["bytes_read"] < 0.01 * data["wheel_bytes"]
    assert data["requires"]["torch"] == "==2.6.0"


@pytest.mark.parametrize("profile", list_profiles(ROOT / "envs").profiles, ids=lambda p: p.name)
def test_shipped_lists_equal_a_fresh_scan(profile, scanner: Scanner):  # type: ignore[no-untyped-def]
    vllm = scanner.scan("vllm", Version(profile.models.vllm))
    transformers = scanner.scan("transformers", Version(profile.models.transformers))
    pins = profile.expected_versions()
    assert (pins["vllm"], pins["transformers"]) == (vllm.version, transformers.version)
    assert list(profile.models.architectures) == sorted(vllm.architectures)
    assert list(profile.models.vllm_model_types) == sorted(vllm.model_types)
    assert list(profile.models.model_types) == sorted(
        set(vllm.model_types) | set(transformers.model_types)
    )
    assert dict(profile.models.previously_supported) == dict(vllm.previously_supported)


def test_qwen35_releases(scanner: Scanner):
    listing = releases_listing(Scanner(index_url()), "Qwen3_5ForConditionalGeneration")
    assert listing is not None and Version(listing.first) >= Version("0.17.0")
