"""compat against the real package index. Run with ``python -m pytest -m network``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
    # vLLM's sources, two transformers releases, and the target's config modules (for the
    # config fields vLLM's loader checks): a few percent of the wheels
    assert data["cost"]["bytes_read"] < 0.05 * data["cost"]["wheel_bytes"]


@pytest.mark.parametrize(
    "profile", Catalog.from_option(str(ROOT / "envs")).list().profiles, ids=lambda p: p.name
)
def test_every_shipped_profiles_pins_are_compatible(profile, scan_cache: Path) -> None:  # type: ignore[no-untyped-def]
    res = run_cli("--envs", str(ROOT / "envs"), "compat", profile.name, "--json")
    res.assert_ok()
    data = res.json()
    assert all(f["architectures"] or f["model_types"] for f in data["findings"])  # scoped ones


def _compat(vllm: str, transformers: str) -> tuple[int, dict[str, Any]]:
    res = run_cli("compat", f"vllm=={vllm}", f"transformers=={transformers}", "--json")
    assert res.code in (0, 1), res.err
    return res.code, res.json()


def test_vllm_0_9_registers_aimv2_which_transformers_4_54_took(scan_cache: Path) -> None:
    code, data = _compat("0.9.2", "4.54.0")
    assert code == 1
    clash = next(f for f in data["findings"] if f["code"] == "registration-clash")
    assert (clash["name"], clash["taken_in"]) == ("aimv2", "4.54.0")
    assert clash["file"] == "vllm/transformers_utils/configs/ovis.py"
    assert clash["architectures"] == [] and clash["model_types"] == []  # vLLM itself
    code, data = _compat("0.9.2", "4.53.1")
    assert code == 0 and not any(f["code"] == "registration-clash" for f in data["findings"])


def test_vllm_0_19_1_runs_with_4_57_6_its_v5_branches_ruled_out(scan_cache: Path) -> None:
    code, data = _compat("0.19.1", "4.57.6")
    assert code == 0 and data["ok"] is True, data["findings"]
    names = {f["name"] for f in data["findings"]}
    assert {"standardize_rope_params", "validate_rope", "validate_layer_type"}.isdisjoint(names)
    assert {"transformers.conversion_mapping", "fetch_audio"}.isdisjoint(names)
    step3 = next(f for f in data["findings"] if f["name"].endswith("tokenization_utils_tokenizers"))
    assert step3["model_types"] == ["step3_vl"]
    assert data["declared"]["inside"] is True


def test_transformers_5_answers_its_fast_image_processors(scan_cache: Path) -> None:
    _code, data = _compat("0.17.1", "5.5.4")
    names = {f["name"] for f in data["findings"]}
    assert {"Qwen2VLImageProcessorFast", "SiglipImageProcessorFast"}.isdisjoint(names)
    assert not any(n.endswith("_fast") for n in names)  # the alias modules exist
    assert data["declared"] == {"requirement": "transformers<5,>=4.56.0", "inside": False}


def test_outside_the_declared_range_is_said(scan_cache: Path) -> None:
    code, data = _compat("0.33.0", "5.24.0")
    assert code == 0
    assert data["declared"] == {"requirement": "transformers<5.21.0,>=5.16.1", "inside": False}


def test_qwen2_vl_rope_conflict_of_vllm_0_8_5_with_transformers_5(scan_cache: Path) -> None:
    for vllm in ("0.8.5", "0.10.2"):
        _code, data = _compat(vllm, "5.0.0")
        found = [f for f in data["findings"] if f["code"] == "config-conflict"]
        qwen2_vl = next(f for f in found if "qwen2_vl" in f["model_types"])
        assert qwen2_vl["name"] == "rope_type=default with type=mrope", vllm
        assert (qwen2_vl["config_key"], qwen2_vl["config_values"]) == ("type", ["mrope"])
    _code, data = _compat("0.13.0", "5.0.0")  # 0.13 reads mrope -> default as a rename
    assert not any("qwen2_vl" in f["model_types"] for f in data["findings"])
