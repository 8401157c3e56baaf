"""Registry scans: the AST reader on real sources, and range reads from a served index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envkit.astdata import OPAQUE, module_tables
from envkit.errors import BadInput
from envkit.registry_scan import (
    TF_AUTO_MAPPINGS,
    TF_CONFIG_AUTO,
    VLLM_CONFIG,
    VLLM_OLD_REGISTRY,
    VLLM_REGISTRY,
    Scanner,
    parse_target,
    releases_listing,
    scan_transformers,
    scan_vllm,
)
from envkit.wheelfetch import WheelError

from helpers import envkit
from indexserver import url
from registry_world import source


def test_vllm_085_registry_from_source():
    found = scan_vllm(
        {VLLM_REGISTRY: source("vllm-0.8.5-registry"), VLLM_CONFIG: source("vllm-0.8.5-config")}
    )
    archs = found["architectures"]
    assert len(archs) == 146  # what importing vllm 0.8.5's ModelRegistry reports
    assert "Qwen2VLForConditionalGeneration" in archs
    assert "Qwen3_5ForConditionalGeneration" not in archs
    # the dict comprehension spreading every LlamaForCausalLM alias into the embedding table
    assert "AquilaModel" in archs and "TransformersForCausalLM" in archs
    assert list(archs) == sorted(archs)
    assert "qwen3_5" not in found["model_types"] and "mllama" in found["model_types"]
    assert len(found["model_types"]) == 22
    assert found["previously_supported"] == {}


def test_vllm_0330_registry_lazy_configs_and_dropped_tables():
    found = scan_vllm(
        {VLLM_REGISTRY: source("vllm-0.33.0-registry"), VLLM_CONFIG: source("vllm-0.33.0-config")}
    )
    assert len(found["architectures"]) == 415
    assert "Qwen3_5ForConditionalGeneration" in found["architectures"]
    assert found["previously_supported"]["Phi3SmallForCausalLM"] == "0.9.2"
    assert "BartModel" in found["out_of_tree"]
    assert len(found["model_types"]) == 53  # LazyConfigDict(name="Class", ...) keywords


def test_vllm_oldest_layout():
    found = scan_vllm({VLLM_OLD_REGISTRY: source("vllm-0.2.7-models-init")})
    assert "LlamaForCausalLM" in found["architectures"] and len(found["architectures"]) == 25


def test_transformers_4_and_5_layouts():
    old = scan_transformers({TF_CONFIG_AUTO: source("transformers-4.51.3-configuration_auto")})
    assert len(old["model_types"]) == 327
    assert {"qwen2", "qwen2_vl", "qwen3"} <= set(old["model_types"])
    assert "qwen3_5" not in old["model_types"]
    new = scan_transformers(
        {
            TF_CONFIG_AUTO: source("transformers-5.24.0-configuration_auto"),
            TF_AUTO_MAPPINGS: source("transformers-5.24.0-auto_mappings"),
        }
    )
    # auto_mappings' table, the .update() in configuration_auto and the gpt-sw3 rebuild
    assert {"qwen3_5", "mlcd", "gpt-sw3"} <= set(new["model_types"])
    assert len(new["model_types"]) == 822


def test_ast_reader_evaluates_data_and_marks_the_rest():
    tables = module_tables(
        "A = {'x': ('m', 'X'), 'y': ('m', 'Y')}\n"
        "B: dict = {**A, 'z': 1, **{k: v for k, v in A.items() if v[1] == 'X'}}\n"
        "C = LazyConfigDict(a='A', b=SomeClass)\n"
        "D = OrderedDict[str, str]([('p', 'P')])\n"
        "D.update({'q': 'Q'})\n"
        "E = compute()\n"
        "F = {**E}\n"
    )
    assert set(tables["B"]) == {"x", "y", "z"}
    assert set(tables["C"]) == {"a", "b"} and tables["C"]["b"] is OPAQUE
    assert tables["D"] == {"p": "P", "q": "Q"}
    assert tables["E"] is OPAQUE and tables["F"] is OPAQUE


def test_a_registry_built_by_code_is_reported_not_guessed():
    with pytest.raises(WheelError, match="cannot read as data"):
        scan_vllm({VLLM_REGISTRY: "_VLLM_MODELS = load_models()\n"})
    with pytest.raises(WheelError, match="not valid Python"):
        scan_vllm({VLLM_REGISTRY: "_VLLM_MODELS = {\n"})
    with pytest.raises(WheelError, match="no model registry"):
        scan_vllm({"vllm/other.py": ""})


@pytest.mark.parametrize("bad", ["vllm", "vllm>=0.8", "vllm==0.8.*", "numpy==1.0", "vllm==x"])
def test_targets_must_be_exact_releases(bad: str):
    with pytest.raises(BadInput):
        parse_target(bad)


def test_scan_reads_a_small_part_of_the_wheel(world, scan_cache: Path, tmp_path: Path):
    res = envkit("scan", "vllm==0.8.5", "--index-url", url(world), "--json", cwd=tmp_path)
    assert res.code == 0, res.err
    data = res.json()
    assert len(data["architectures"]) == 146 and len(data["model_types"]) == 22
    assert data["requires"]["torch"] == "==2.6.0"
    assert data["requires"]["transformers"] == ">=4.51.1"
    assert data["requires_python"] == "<3.13,>=3.9"
    assert data["cached"] is False
    assert data["bytes_read"] < 0.1 * data["wheel_bytes"], data
    again = envkit("scan", "vllm==0.8.5", "--index-url", url(world), "--json", cwd=tmp_path)
    assert again.json()["cached"] is True
    assert again.json()["architectures"] == data["architectures"]
    fresh = envkit(
        "scan", "vllm==0.8.5", "--index-url", url(world), "--json", "--no-cache", cwd=tmp_path
    )
    assert fresh.json()["cached"] is False
    text = envkit("scan", "transformers==4.51.3", "--index-url", url(world), cwd=tmp_path)
    assert text.code == 0 and "model types AutoConfig knows (327)" in text.out


def test_scan_failures(world, scan_cache: Path, tmp_path: Path):
    res = envkit("scan", "vllm==0.9.0", "--index-url", url(world), cwd=tmp_path)
    assert res.code == 2 and "no model registry" in res.err
    res = envkit("scan", "vllm==9.9.9", "--index-url", url(world), cwd=tmp_path)
    assert res.code == 2 and "No wheel of version 9.9.9" in res.err
    res = envkit("scan", "vllm==0.8.5", "--index-url", "http://127.0.0.1:9/simple", cwd=tmp_path)
    assert res.code == 2 and "Cannot reach" in res.err and "Traceback" not in res.err
    res = envkit("scan", "numpy==1.0", cwd=tmp_path)
    assert res.code == 2
    res = envkit("scan", cwd=tmp_path)
    assert res.code == 2 and "Nothing to scan" in res.err


def test_server_without_ranges_is_refused(tmp_path: Path, scan_cache: Path):
    import indexserver
    import registry_world

    folder = tmp_path / "idx"
    folder.mkdir()
    registry_world.wheels()[1].write(folder)
    with indexserver.serve(folder, ranges=False) as server:
        res = envkit("scan", "vllm==0.8.5", "--index-url", url(server), cwd=tmp_path)
    assert res.code == 2 and "does not serve byte ranges" in res.err


def test_first_and_newest_release_listing_an_architecture(world, scan_cache: Path):
    scanner = Scanner(url(world))
    qwen2vl = releases_listing(scanner, "Qwen2VLForConditionalGeneration")
    assert qwen2vl is not None and (qwen2vl.first, qwen2vl.newest) == ("0.8.5", "0.33.0")
    llama = releases_listing(scanner, "LlamaForCausalLM")
    assert llama is not None and llama.first == "0.2.7"
    # dropped after 0.9.2: the newest published release that still lists it is 0.8.5
    phi = releases_listing(scanner, "Phi3SmallForCausalLM")
    assert phi is not None and phi.newest == "0.8.5"
    assert releases_listing(scanner, "NoSuchForCausalLM") is None
    cached = json.loads(next(scan_cache.rglob("vllm-0.33.0*.json")).read_text())
    assert "Qwen3_5ForConditionalGeneration" in cached["architectures"]
