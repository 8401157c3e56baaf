"""Scans against the real package index. Run with ``python -m pytest -m network``."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from envkit.io.urls import index_url
from envkit.profiles.catalog import Catalog
from envkit.releases.registry import Scanner, releases_listing

from helpers import ROOT, envkit

pytestmark = pytest.mark.network


@pytest.fixture(scope="module")
def scanner() -> Scanner:
    return Scanner(index_url(), use_cache=False)


def test_vllm_085_scan_reads_under_one_percent(tmp_path: Path) -> None:
    res = envkit("scan", "vllm==0.8.5", "--no-cache", "--json", cwd=tmp_path)
    res.assert_ok()
    data = res.json()
    assert len(data["architectures"]) == 146
    assert data["bytes_read"] < 0.01 * data["wheel_bytes"]
    assert data["requires"]["torch"] == "==2.6.0"


@pytest.mark.parametrize(
    "profile", Catalog.from_option(str(ROOT / "envs")).list().profiles, ids=lambda p: p.name
)
def test_shipped_lists_equal_a_fresh_scan(profile, scanner: Scanner) -> None:  # type: ignore[no-untyped-def]
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


def test_qwen35_releases(scanner: Scanner) -> None:
    listing = releases_listing(scanner, "Qwen3_5ForConditionalGeneration")
    assert listing is not None and Version(listing.first) >= Version("0.17.0")


# What each real release's registry holds (counted by importing the installed packages), read
# here from the published wheels: each layout generation the offline fixtures imitate.
@pytest.mark.parametrize(
    ("project", "version", "field", "count"),
    [
        ("vllm", "0.2.7", "architectures", 25),  # models/__init__.py, one _MODELS dict
        ("vllm", "0.8.5", "architectures", 146),  # registry.py, spreads and a comprehension
        ("vllm", "0.8.5", "model_types", 22),  # an annotated dict spreading an override
        ("vllm", "0.33.0", "architectures", 415),  # with dropped and out-of-tree tables
        ("vllm", "0.33.0", "model_types", 53),  # LazyConfigDict(name="Class")
        ("transformers", "4.51.3", "model_types", 327),  # OrderedDict([...])
        ("transformers", "5.24.0", "model_types", 822),  # auto_mappings + update + rebuild
    ],
)
def test_real_layouts(scanner: Scanner, project: str, version: str, field: str, count: int) -> None:
    found = scanner.scan(project, Version(version))
    assert len(getattr(found, field)) == count


@pytest.mark.parametrize(
    ("arch", "first", "newest", "dropped_in", "plugin"),
    [
        ("Phi3SmallForCausalLM", "0.4.3", "0.9.2", "0.10.0", None),  # dropped, recorded
        ("FuyuForCausalLM", "0.5.2", "0.25.1", "0.26.0", None),  # 0.25.1 still had it
        ("BartForConditionalGeneration", "0.5.5", "0.10.2", "0.11.0", "bart-plugin"),
        ("Glm4ForCausalLM", "0.8.4", None, None, None),  # still listed
    ],
)
def test_history_of_real_architectures(  # type: ignore[no-untyped-def]
    arch, first, newest, dropped_in, plugin, tmp_path: Path
) -> None:
    res = envkit("history", arch, "--json", cwd=tmp_path)
    res.assert_ok()
    (found,) = res.json()["architectures"]
    assert found["first"] == first
    if newest:
        assert found["newest"] == newest and found["dropped_in"] == dropped_in
    assert (found["plugin"] or "").endswith(plugin or "") and bool(found["plugin"]) == bool(plugin)
    if arch == "Glm4ForCausalLM":  # vLLM 0.8.5's test registry: transformers >= 4.52.dev0
        bound = {r["version"]: r["bound"] for r in found["releases"]}["0.8.5"]
        assert bound is not None and bound["min"] == "4.52.dev0"
