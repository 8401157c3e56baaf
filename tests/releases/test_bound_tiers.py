"""Bounds by tier: which of vLLM's per-architecture transformers bounds its own
initialization test applies (a refusal) and which only the tests comparing with the Hugging
Face reference runner do (the warning transformers-bound-hf-only), read per release from the
sdist's test registry and initialization test, in the shapes vLLM 0.13 and 0.14+ use."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import layouts
import pytest
from packaging.version import Version

from envkit.profiles.bounds import HF_ONLY, TOO_NEW, InitPolicy, parse_policy, parse_registry
from envkit.profiles.profile import load_profile
from envkit.releases.registry import Scanner
from envkit.releases.testregistry import transformers_bounds

import indexserver
from helpers import envkit
from registry_world import padding
from wheelhouse import Wheel

REGISTRY_14 = """
@dataclass(frozen=True)
class _HfExamplesInfo:
    default: str
    transformers_version_reason: dict[Literal["vllm", "hf"], str] | None = None


_TEXT_GENERATION_EXAMPLE_MODELS = {
    "Qwen3ForCausalLM": _HfExamplesInfo(
        "example-org/qwen3-tiny",
        max_transformers_version="4.57",
        transformers_version_reason={"hf": "the reference runner's remote code is too old"},
    ),
    "LlamaForCausalLM": _HfExamplesInfo(
        "example-org/llama-tiny",
        max_transformers_version="4.57",
        transformers_version_reason={"vllm": "vLLM's own loader breaks"},
    ),
    "Qwen2ForCausalLM": _HfExamplesInfo("example-org/qwen2-tiny", min_transformers_version="9.0"),
}
"""
INIT_14 = """
def test_can_initialize_small_subset(model_arch):
    model_info = HF_EXAMPLE_MODELS.get_hf_info(model_arch)
    model_info.check_transformers_version(
        on_fail="skip",
        check_max_version=False,
        check_version_reason="vllm",
    )
"""
INIT_13 = """
def test_can_initialize(model_arch):
    model_info.check_transformers_version(on_fail="skip")
"""


def test_the_initialization_test_says_which_bounds_vllm_applies() -> None:
    assert parse_policy(INIT_13) == InitPolicy()
    assert parse_policy("def test():\n    pass\n") == InitPolicy()
    policy = parse_policy(INIT_14)
    assert policy == InitPolicy(check_min=True, check_max=False, reason_key="vllm")
    bounds = parse_registry(REGISTRY_14, policy=policy)
    qwen3, llama, qwen2 = (
        bounds[a] for a in ("Qwen3ForCausalLM", "LlamaForCausalLM", "Qwen2ForCausalLM")
    )
    assert qwen3.hf_only == ("max",) and qwen3.reason.startswith("hf: the reference runner")
    assert llama.hf_only == () and qwen2.hf_only == ()  # names vLLM; a minimum always applies
    assert (qwen3.excludes("5.0.0"), qwen3.refuses("5.0.0"), qwen3.hf_only_for("5.0.0")) == (
        TOO_NEW, "", True,
    )  # fmt: skip
    assert llama.refuses("5.0.0") == TOO_NEW and not llama.hf_only_for("5.0.0")
    # with vLLM 0.13's test every bound applies
    assert all(not b.hf_only for b in parse_registry(REGISTRY_14, policy=InitPolicy()).values())


@pytest.fixture(scope="module")
def tiers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    folder = tmp_path_factory.mktemp("tiers")
    wheels = [
        Wheel(
            "vllm", "0.17.1",
            {"vllm/_C.so": padding(100_000), **layouts.vllm_0330().files},
            requires=["transformers>=4.56.0", "torch==2.10.0"],
            sdist=True,
            sdist_files={
                "tests/models/registry.py": REGISTRY_14,
                "tests/models/test_initialization.py": INIT_14,
            },
        ),
        Wheel("transformers", "5.20.2", dict(layouts.transformers_5().files)),
    ]  # fmt: skip
    for wheel in wheels:
        wheel.write(folder)
    with indexserver.serve(folder) as server:
        server.upload_times = {p.name: "2026-01-01T00:00:00Z" for p in folder.glob("*.whl")}
        yield server


def test_check_model_refuses_what_vllm_applies_and_warns_of_the_rest(
    tiers: indexserver.Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    envs = tmp_path / "envs"
    envs.mkdir()
    (envs / "p.toml").write_text(
        'python = "3.12"\nrequirements = ["vllm==0.17.1"]\nconstraints = ["transformers==5.20.2"]\n'
    )
    index = indexserver.url(tiers)
    res = envkit("--envs", str(envs), "scan", "--update", "p", "--index-url", index, cwd=tmp_path)
    res.assert_ok()
    bounds = load_profile(envs / "p.toml").models.transformers_bounds
    assert bounds["Qwen3ForCausalLM"].hf_only == ("max",)  # written, and read back
    assert 'hf_only = "max"' in (envs / "p.toml").read_text()

    def check(arch: str, model_type: str) -> tuple[int, dict[str, Any]]:
        config = tmp_path / f"{arch}.json"
        config.write_text(json.dumps({"model_type": model_type, "architectures": [arch]}))
        res = envkit("--envs", str(envs), "check-model", "p", str(config), "--json", cwd=tmp_path)
        return res.code, res.json()

    code, data = check("Qwen3ForCausalLM", "qwen3")
    assert code == 0 and data["ok"] is True  # the warning changes neither
    assert [(p["code"], p["severity"]) for p in data["problems"]] == [(HF_ONLY, "warning")]
    code, data = check("LlamaForCausalLM", "llama")
    assert code == 1 and [p["code"] for p in data["problems"]] == [TOO_NEW]


def test_the_sdist_is_read_only_as_far_as_its_test_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM's sdists hold the test files about two thirds of the way in: the download stops
    once both are read (the bounds are those of the files), never holding the body."""
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    tail = os.urandom(3 * 1024 * 1024).hex()  # after tests/ in the archive, as vllm/ is
    Wheel(
        "vllm", "0.17.1",
        {"vllm/_C.so": padding(100_000), **layouts.vllm_0330().files},
        sdist=True,
        sdist_files={
            "tests/models/registry.py": REGISTRY_14,
            "tests/models/test_initialization.py": INIT_14,
            "vllm/zz_kernels.txt": tail,
        },
    ).write(tmp_path)  # fmt: skip
    size = (tmp_path / "vllm-0.17.1.tar.gz").stat().st_size
    with indexserver.serve(tmp_path) as server:
        scanner = Scanner(indexserver.url(server))
        scanner.sdists("vllm")
        listed = scanner.http.traffic.bytes
        found = transformers_bounds(scanner, Version("0.17.1"))
    assert found == parse_registry(REGISTRY_14, policy=parse_policy(INIT_14))
    assert size > 3_000_000 and scanner.http.traffic.bytes - listed < size // 4
