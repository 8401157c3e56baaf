"""Registry scans: the AST reader on each layout's shape (layouts.py), and range reads from
a served index."""

from __future__ import annotations

import json
from pathlib import Path

import layouts
import pytest

from envkit.errors import BadInput, WheelError
from envkit.releases.asttables import OPAQUE, module_tables
from envkit.releases.registry import (
    VLLM_REGISTRY,
    Scanner,
    parse_target,
    releases_listing,
    scan_transformers,
    scan_vllm,
)

import indexserver
from helpers import envkit
from indexserver import url


def test_vllm_085_registry_shape() -> None:
    layout = layouts.vllm_085()
    found = scan_vllm(layout.files)
    archs = found["architectures"]
    assert set(archs) == layout.architectures and list(archs) == sorted(archs)
    assert "Qwen2VLForConditionalGeneration" in archs
    assert "Qwen3_5ForConditionalGeneration" not in archs
    # the dict comprehension spreading every LlamaForCausalLM alias into the embedding table
    assert "AquilaForCausalLM" in archs and "TransformersForCausalLM" in archs
    # an annotated table spreading an override table
    assert set(found["model_types"]) == layout.model_types and "mllama" in found["model_types"]
    assert found["previously_supported"] == {}


def test_vllm_0330_registry_lazy_configs_and_dropped_tables() -> None:
    layout = layouts.vllm_0330()
    found = scan_vllm(layout.files)
    assert set(found["architectures"]) == layout.architectures
    assert "Qwen3_5ForConditionalGeneration" in found["architectures"]
    assert found["previously_supported"] == layout.previously_supported
    assert found["out_of_tree"] == layout.out_of_tree
    assert set(found["model_types"]) == layout.model_types  # LazyConfigDict(name="Class")


def test_vllm_oldest_layout() -> None:
    layout = layouts.vllm_old()
    found = scan_vllm(layout.files)
    assert set(found["architectures"]) == layout.architectures


def test_transformers_4_and_5_layouts() -> None:
    old_layout, new_layout = layouts.transformers_4(), layouts.transformers_5()
    old = scan_transformers(old_layout.files)
    assert set(old["model_types"]) == old_layout.model_types
    assert {"qwen2", "qwen2_vl", "qwen3"} <= set(old["model_types"])
    assert "qwen3_5" not in old["model_types"]
    new = scan_transformers(new_layout.files)
    # auto_mappings' table, the .update() in configuration_auto and the gpt-sw3 rebuild
    assert {"qwen3_5", "mlcd", "gpt-sw3"} <= set(new["model_types"])
    assert set(new["model_types"]) == new_layout.model_types


def test_ast_reader_evaluates_data_and_marks_the_rest() -> None:
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


def test_a_registry_built_by_code_is_reported_not_guessed() -> None:
    with pytest.raises(WheelError, match="cannot read as data"):
        scan_vllm({VLLM_REGISTRY: "_VLLM_MODELS = load_models()\n"})
    with pytest.raises(WheelError, match="not valid Python"):
        scan_vllm({VLLM_REGISTRY: "_VLLM_MODELS = {\n"})
    with pytest.raises(WheelError, match="no model registry"):
        scan_vllm({"vllm/other.py": ""})


@pytest.mark.parametrize("bad", ["vllm", "vllm>=0.8", "vllm==0.8.*", "numpy==1.0", "vllm==x"])
def test_targets_must_be_exact_releases(bad: str) -> None:
    with pytest.raises(BadInput):
        parse_target(bad)


def test_scan_reads_a_small_part_of_the_wheel(
    world: indexserver.Server, scan_cache: Path, tmp_path: Path
) -> None:
    res = envkit("scan", "vllm==0.8.5", "--index-url", url(world), "--json", cwd=tmp_path)
    res.assert_ok()
    data = res.json()
    truth = layouts.vllm_085()
    assert set(data["architectures"]) == truth.architectures
    assert set(data["model_types"]) == truth.model_types
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
    known = len(layouts.transformers_4().model_types)
    assert text.code == 0 and f"model types AutoConfig knows ({known})" in text.out
    # the requirements the scan keeps, said as those: not every one the wheel has
    said = " ".join(text.out.split())  # as folded to the terminal's width
    assert "; of torch, transformers, tokenizers, torchvision, torchaudio: tokenizers<0.22" in said


def test_scan_failures(world: indexserver.Server, scan_cache: Path, tmp_path: Path) -> None:
    res = envkit("scan", "vllm==0.9.0", "--index-url", url(world), cwd=tmp_path)
    assert res.code == 2 and "no model registry" in res.err
    res = envkit("scan", "vllm==9.9.9", "--index-url", url(world), cwd=tmp_path)
    assert res.code == 2 and f"vllm 9.9.9: the index {url(world)} lists no wheel of it" in res.err
    assert "(its newest release with a wheel is 0.33.0)" in res.err and "vllm==0.33.0." in res.err
    res = envkit("scan", "vllm==0.8.5", "--index-url", "http://127.0.0.1:9/simple", cwd=tmp_path)
    assert res.code == 2 and "Cannot reach" in res.err and "Traceback" not in res.err
    res = envkit("scan", "numpy==1.0", cwd=tmp_path)
    assert res.code == 2
    res = envkit("scan", cwd=tmp_path)
    assert res.code == 2 and "Nothing to scan" in res.err


def test_server_without_ranges_is_refused(tmp_path: Path, scan_cache: Path) -> None:
    import indexserver
    import registry_world

    folder = tmp_path / "idx"
    folder.mkdir()
    registry_world.wheels()[1].write(folder)
    with indexserver.serve(folder, ranges=False) as server:
        res = envkit("scan", "vllm==0.8.5", "--index-url", url(server), cwd=tmp_path)
    assert res.code == 2 and "does not serve byte ranges" in res.err


def test_first_and_newest_release_listing_an_architecture(
    world: indexserver.Server, scan_cache: Path
) -> None:
    scanner = Scanner(url(world))
    qwen2vl = releases_listing(scanner, "Qwen2VLForConditionalGeneration")
    assert qwen2vl is not None and (qwen2vl.first, qwen2vl.newest) == ("0.8.5", "0.33.0")
    llama = releases_listing(scanner, "LlamaForCausalLM")
    assert llama is not None and llama.first == "0.2.7"
    # dropped after 0.9.2: the newest published release that still lists it is 0.8.5
    phi = releases_listing(scanner, "Phi3SmallForCausalLM")
    assert phi is not None and phi.newest == "0.8.5"
    assert releases_listing(scanner, "NoSuchForCausalLM") is None
    # a record that says "until 0.2.7" is checked, not trusted: 0.8.5 still lists it
    aquila = releases_listing(scanner, "AquilaForCausalLM")
    assert aquila is not None and (aquila.first, aquila.newest) == ("0.8.5", "0.8.5")
    # one the newest release knows nothing of is looked for in every release
    mid = releases_listing(scanner, "Mid000ForCausalLM")
    assert mid is not None and (mid.first, mid.newest) == ("0.8.5", "0.8.5")
    # moved to a plugin, and never in vLLM itself here: said as such
    bart = releases_listing(scanner, "BartModel")
    assert bart is not None and not bart.listed and bart.plugin == "the Bart plugin"
    cached = json.loads(next(scan_cache.rglob("vllm-0.33.0*.json")).read_text())
    assert "Qwen3_5ForConditionalGeneration" in cached["architectures"]
