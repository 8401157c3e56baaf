"""serving.explain.explaining: explain's flow, the versions it confirms against (a venv's
METADATA, else a profile's pins) and envkit lint's notes on the log's arguments."""

from __future__ import annotations

from pathlib import Path

import pytest
from bootlogs import FAILURES, log

from envkit.errors import BadInput
from envkit.profiles.profile import load_profile
from envkit.serving.explain.explaining import explain_log, installed_for
from envkit.serving.explain.knowledge import GpuFacts, ProfileFacts, Tables

from helpers import ROOT

KNOWN = Tables(
    profile_facts=(
        ProfileFacts(
            "old-0.8.5",
            "0.8.5",
            "4.51.3",
            "2.6.0",
            "12.4",
            frozenset({"qwen2_vl"}),
            frozenset({"Qwen2VLForConditionalGeneration"}),
        ),
    ),
    gpus={"t4": GpuFacts("t4", 16 * 1024**3, (7, 5))},
)


def _venv(root: Path) -> Path:
    site = root / ".venv" / "lib" / "python3.12" / "site-packages"
    for name, version in (("vllm", "0.8.5"), ("transformers", "5.24.0")):
        info = site / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nbody"
        )
    return root / ".venv"


def test_confirms_against_a_venv_and_a_profile(tmp_path: Path) -> None:
    venv = _venv(tmp_path)
    path = tmp_path / "r1.log"
    path.write_text(log(FAILURES["transformers-too-new"]))
    env = explain_log(str(path), KNOWN, venv=venv).explanation.to_dict()["environment"]
    assert env["checks"][0] == {
        "what": "vllm",
        "log": "0.8.5",
        "environment": "0.8.5",
        "same": True,
        # the check as a result, beside its own fields
        "code": "log-matches-environment",
        "severity": "ok",
        "subject": "vllm",
        "message": "vllm: log 0.8.5, environment 0.8.5",
        "evidence": {"log": "0.8.5", "environment": "0.8.5"},
        "fix": "",
    }
    assert env["checks"][1]["same"] is False and env["checks"][1]["log"] == "4.51.3"
    assert env["checks"][1]["severity"] == "error"
    assert any(n.startswith("confirmed:") and "5.24.0" in n for n in env["notes"])
    profile = load_profile(ROOT / "envs" / "vllm-0.17.1+qwen3.5.toml")
    env = explain_log(str(path), KNOWN, profile=profile).explanation.to_dict()["environment"]
    assert env["checks"][0]["environment"] == "0.17.1" and env["checks"][0]["same"] is False
    found = installed_for(None, profile)
    assert found is not None and found.versions["vllm"] == "0.17.1"
    assert installed_for(venv, profile) == installed_for(venv, None)  # the venv wins
    assert installed_for(None, None) is None
    with pytest.raises(BadInput):
        explain_log(str(path), KNOWN, venv=tmp_path)  # no site-packages in it


def test_the_logs_arguments_are_linted_and_an_unreachable_index_is_no_verdict(
    tmp_path: Path,
) -> None:
    path = tmp_path / "r1.log"
    path.write_text(log(FAILURES["uva-unavailable"]))
    profile = load_profile(ROOT / "envs" / "vllm-0.8.5+qwen2-vl.toml")
    done = explain_log(str(path), KNOWN, profile=profile)
    assert done.explanation.cause.code.value == "uva-unavailable"
    [note] = done.notes  # the tests' index does not answer: said, never a verdict
    assert note.startswith("lint: the log's arguments not checked against vLLM's parser")
    assert explain_log(str(path), KNOWN).notes == ()  # no profile: nothing to lint against
