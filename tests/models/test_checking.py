"""models.checking: the check-model and which flow, from the shipped profiles' [models]
tables (true to their pins, so nothing is scanned: offline), with and without a GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.errors import BadInput
from envkit.gpu.installed.detect import Choice
from envkit.models.checking import check
from envkit.profiles.profile import Profile, load_profile

from helpers import ROOT
from registry_world import MODELS

QWEN2VL = MODELS / "Qwen2-VL-2B-Instruct"
QWEN35 = MODELS / "Qwen3.5-9B"
OFFLINE = "http://127.0.0.1:9/simple"
NO_GPU = Choice(None, "")


def shipped() -> list[Profile]:
    return [load_profile(p) for p in sorted((ROOT / "envs").glob("*.toml"))]


def test_shipped_profiles_answer_report_1_offline() -> None:
    report = check(str(QWEN35), None, shipped, index=OFFLINE, revision=None, target=NO_GPU)
    data = report.to_dict()
    assert report.ok
    assert "vllm-0.8.5+qwen2-vl" not in data["supported_by"]
    assert {"vllm-0.17.1+qwen3.5", "vllm-0.33.0"} <= set(data["supported_by"])
    old = load_profile(ROOT / "envs" / "vllm-0.8.5+qwen2-vl.toml")
    assert check(str(QWEN2VL), old, shipped, index=OFFLINE, revision=None, target=NO_GPU).ok


def test_a_model_that_cannot_be_read_is_said_before_any_profile_is_listed(
    tmp_path: Path,
) -> None:
    listed: list[str] = []

    def listing() -> list[Profile]:
        listed.append("asked")
        return []

    with pytest.raises(BadInput):
        check(str(tmp_path / "none"), None, listing, index=OFFLINE, revision=None, target=NO_GPU)
    assert listed == []
