"""Bounds by tier and history against the real releases. ``python -m pytest -m network``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from envkit.io.urls import index_url
from envkit.releases.registry import Scanner
from envkit.releases.testregistry import transformers_bounds

from helpers import run_cli

ROOT = Path(__file__).resolve().parent.parent.parent  # the checkout
pytestmark = pytest.mark.network


def test_vllm_0_17_1_applies_a_maximum_only_when_its_reason_names_vllm(scan_cache: Path) -> None:
    scanner = Scanner(index_url(None))
    old = transformers_bounds(scanner, Version("0.13.0"))
    assert all(not b.hf_only for b in old.values())  # its initialization test applies all
    new = transformers_bounds(scanner, Version("0.17.1"))
    assert new["ChatGLMModel"].hf_only == ("max",)
    assert new["DeepseekVLV2ForCausalLM"].hf_only == ("max",)
    assert new["MolmoForCausalLM"].hf_only == ()  # its reason names vLLM
    assert new["ChatGLMModel"].refuses("4.57.6") == ""


def history(arch: str) -> dict[str, Any]:
    res = run_cli("history", arch, "--json")
    res.assert_ok()
    found: dict[str, Any] = res.json()["architectures"][0]
    return found


@pytest.mark.parametrize(
    ("arch", "newest", "dropped"),
    [
        ("EAGLEModel", "0.9.2", "0.10.0"),
        ("Qwen2ForSequenceClassification", "0.9.2", "0.10.0"),
        ("TransformersModel", "0.11.0", "0.11.1"),
    ],
)
def test_a_drop_vllm_never_recorded_is_dated(
    arch: str, newest: str, dropped: str, scan_cache: Path
) -> None:
    data = history(arch)
    assert (data["newest"], data["dropped_in"]) == (newest, dropped)


def test_a_record_the_registries_contradict_is_not_repeated(
    tmp_path: Path, scan_cache: Path
) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "fuyu", "architectures": ["FuyuForCausalLM"]}))
    res = run_cli("--envs", str(ROOT / "envs"), "check-model", "vllm-0.33.0", str(config), "--json")
    assert res.code == 1
    (problem,) = [p for p in res.json()["problems"] if p["code"] == "architecture-removed"]
    assert "through 0.25.1 list it" in problem["message"]
    assert "until 0.25.0, which its registries contradict" in problem["message"]
    fuyu = history("FuyuForCausalLM")
    assert (fuyu["newest"], fuyu["dropped_in"]) == ("0.25.1", "0.26.0")
