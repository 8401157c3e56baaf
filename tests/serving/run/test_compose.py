"""plan --compose's service: fixed keys, a checked image tag, and command words that reach
vLLM as they are, through YAML and through Compose's own interpolation of ``$``."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.errors import BadInput
from envkit.serving.command import Recommendation, serve_args
from envkit.serving.run.compose import compose, image

yaml = pytest.importorskip("yaml", reason="a YAML parser reads the file back")

REC = Recommendation(
    gpu_memory_utilization=0.86,
    max_model_len=4096,
    dtype="half",
    mm_processor_kwargs={"max_pixels": 401408},
)
KEYS = {"image", "ports", "ipc", "environment", "command", "deploy"}
# read back by libyaml's safe loader where PyYAML has it: the same documents its Python one
# reads (the constructors are the same; only the scanner and parser are C), at a fraction of
# the cost per example, which was most of the property test's time
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def service(text: str) -> dict[str, Any]:
    doc = yaml.load(text, Loader=SAFE_LOADER)
    assert set(doc) == {"services"} and set(doc["services"]) == {"vllm"}
    svc: dict[str, Any] = doc["services"]["vllm"]
    assert set(svc) == KEYS
    return svc


def test_a_dollar_reaches_vllm_as_it_is() -> None:
    model = "/models/$HOME/${USER:-x}/$$/end$"
    svc = service(compose(model, REC, "0.8.5"))
    words = ["--model", model, *serve_args(REC)]
    assert svc["command"] == [w.replace("$", "$$") for w in words]  # Compose makes $$ a $
    assert svc["image"] == "vllm/vllm-openai:v0.8.5"
    assert svc["environment"] == ["HF_TOKEN"]
    assert json.loads(svc["command"][-1]) == {"max_pixels": 401408}


@given(st.text(max_size=40))
@settings(max_examples=examples(300), deadline=None)
def test_no_model_path_adds_a_key_or_changes_a_word(model: str) -> None:
    svc = service(compose(model, REC, "0.8.5"))
    assert svc["command"][:2] == ["--model", model.replace("$", "$$")]
    assert svc["command"][2:] == serve_args(REC)


def test_a_version_that_cannot_name_a_tag_is_refused() -> None:
    assert image("") == "vllm/vllm-openai:latest"
    with pytest.raises(BadInput):
        image("0.8.5\n  privileged: true")


def _compose_available() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _compose_available(), reason="docker compose is not installed")
def test_compose_itself_reads_the_words_back(tmp_path: Path) -> None:
    model = "/models/$HOME/${USER}/a b"
    (tmp_path / "compose.yaml").write_text(compose(model, REC, "0.8.5"))
    done = subprocess.run(
        ["docker", "compose", "-f", str(tmp_path / "compose.yaml"), "config", "--format", "json"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": "/nowhere", "USER": "someone"},
    )
    assert done.returncode == 0, done.stderr
    command = json.loads(done.stdout)["services"]["vllm"]["command"]
    assert command == ["--model", model, *serve_args(REC)]
