"""envkit compat on what vLLM does at start-up: registration clashes, code the checked
release cannot run, lazily loaded config modules, transformers 5's renamed names, config
fields vLLM's loader refuses, and vLLM's declared range (startup_world's wheels, served on a
local index with range requests)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import indexserver
from helpers import output, run_cli


def compat(world: indexserver.Server, *args: str) -> tuple[int, dict[str, Any]]:
    res = run_cli("compat", *args, "--json", "--index-url", indexserver.url(world))
    assert res.code in (0, 1), res.err
    return res.code, output("compat", res.out)


def by_name(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in data["findings"]}


def test_a_name_vllm_registers_that_transformers_took_breaks_vllm(
    startup_world: indexserver.Server, scan_cache: Path
) -> None:
    code, data = compat(startup_world, "vllm==0.9.2", "transformers==4.55.0")
    assert code == 1 and data["ok"] is False
    clash = by_name(data)["aimv2"]
    assert clash["code"] == "registration-clash"
    assert (clash["file"], clash["line"]) == ("vllm/transformers_utils/configs/ovis.py", 12)
    # the config package is imported at start-up, and imports the module: vLLM itself breaks
    assert clash["architectures"] == [] and clash["model_types"] == []
    assert clash["taken_in"] == "4.54.0"  # the first release owning the model type
    assert "defines model type 'aimv2'" in clash["detail"]
    # exist_ok=True and a string key to AutoProcessor cannot raise
    assert {"ovis_tok", "OvisProcessor"}.isdisjoint(by_name(data))
    code, before = compat(startup_world, "vllm==0.9.2", "transformers==4.53.1")
    assert code == 0 and "aimv2" not in by_name(before)


def test_transformers_5_answers_its_renamed_image_processors(
    startup_world: indexserver.Server, scan_cache: Path
) -> None:
    _code, data = compat(startup_world, "vllm==0.9.2", "transformers==5.5.4")
    found = by_name(data)
    # the lazy package answers XImageProcessorFast with XImageProcessor; the alias module
    # made in a loop over the image processing files exists, and answers the same way
    assert "SiglipImageProcessorFast" not in found
    assert "Qwen2VLImageProcessorFast" not in found
    assert "transformers.models.qwen2_vl.image_processing_qwen2_vl_fast" not in found
    # a name whose plain class does not exist is missing all the same
    missing = found["NoSuchImageProcessorFast"]
    assert missing["architectures"] == ["Gemma3nForConditionalGeneration"]
    # code under a transformers-5 branch: there it runs, and its module exists
    assert "transformers.conversion_mapping" not in found


def test_a_config_field_vllm_refuses_is_scoped_to_the_model_types(
    startup_world: indexserver.Server, scan_cache: Path
) -> None:
    _code, data = compat(startup_world, "vllm==0.9.2", "transformers==5.5.4")
    conflict = next(f for f in data["findings"] if f["code"] == "config-conflict")
    assert conflict["name"] == "rope_type=default with type=mrope"
    assert conflict["file"] == "vllm/transformers_utils/config.py"
    assert conflict["model_types"] == ["qwen2_vl", "qwen2_vl_text"]
    assert (conflict["config_key"], conflict["config_values"]) == ("type", ["mrope"])
    assert "configuration_qwen2_vl.py" in conflict["detail"]


def test_guarded_and_lazily_loaded_code_raises_only_where_it_runs(
    startup_world: indexserver.Server, scan_cache: Path
) -> None:
    code, data = compat(startup_world, "vllm==0.19.1", "transformers==4.57.6")
    assert code == 0 and data["ok"] is True, data["findings"]
    found = by_name(data)
    # a flag computed from the version rules out the v5 call; the version helper rules out
    # the import after it (both missing in 4.57.6)
    assert {"standardize_rope_params", "transformers.utils.output_capturing"}.isdisjoint(found)
    # a config module the lazy table loads for one model type breaks that model type only
    step3 = found["transformers.tokenization_utils_tokenizers"]
    assert step3["model_types"] == ["step3_vl"] and step3["architectures"] == []


def test_the_declared_range_is_said_beside_the_verdict(
    startup_world: indexserver.Server, scan_cache: Path
) -> None:
    code, data = compat(startup_world, "vllm==0.19.1", "transformers==5.5.4")
    assert data["declared"] == {"requirement": "transformers!=5.0.*,<5.5,>=4.56.0", "inside": False}
    assert code == 0  # outside the range is no run-time finding
    _code, inside = compat(startup_world, "vllm==0.19.1", "transformers==4.57.6")
    assert inside["declared"]["inside"] is True
    text = run_cli(
        "compat",
        "vllm==0.19.1",
        "transformers==5.5.4",
        "--index-url",
        indexserver.url(startup_world),
    )
    said = " ".join(text.out.split())
    assert "transformers 5.5.4 is outside vLLM 0.19.1's declared" in said
    assert "no installer picks it without an override" in said
