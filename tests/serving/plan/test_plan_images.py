"""envkit plan's image budget (serving.plan.mmbudget): the images vLLM's profiling run puts through
the vision tower, as vLLM counts them, at the pixels asked (--mm-processor-kwargs) and with
the items per prompt asked (--limit-mm-per-prompt), ahead of the KV cache (report 3); and what
plan says when it had to assume the whole card free (report 2)."""

from __future__ import annotations

import json
from pathlib import Path

from envkit.gpu.cards import GIB
from envkit.serving.command import MmKwargs, MmLimits
from envkit.serving.plan.memory_plan import PlanInput, make_plan

from helpers import ROOT, envkit
from registry_world import MODELS

QWEN2VL = MODELS / "Qwen2-VL-2B-Instruct"
QWEN35 = MODELS / "Qwen3.5-9B"


def plan(folder: Path, **kw):  # type: ignore[no-untyped-def]
    config = json.loads((folder / "config.json").read_text())
    return make_plan(config, folder, "m", PlanInput(model=folder, **kw))


def test_report_3_profiles_one_image_of_16384_tokens() -> None:
    """vLLM's log in report 3: 'Encoder cache will be initialized with a budget of 16384
    tokens, and profiled with 1 image items of the maximum feature size.'"""
    p = plan(QWEN35, gpu_memory=24 * GIB, max_model_len=10000)
    assert p.mm is not None
    assert (p.mm.encoder_budget, p.mm.profiled_items_asked) == (16384, 1)
    # the recommendation's 512-token images: the 2048-token budget of a GPU under 70 GiB
    assert p.mm.recommended_max_pixels == 524288 and p.mm.profiled_items == 2048 // 512
    assert p.memory.mm_profile > 4 * p.memory.recommended_mm_profile > 0
    # a GPU of 70 GiB or more batches 8192 tokens: 16 images of 512 tokens
    big = plan(QWEN35, gpu_memory=80 * GIB, max_model_len=10000)
    assert big.mm is not None and big.mm.profiled_items == 16


def test_it_fits_as_asked_counts_the_images_at_the_pixels_asked() -> None:
    """Without the images the KV cache would hold the context; at the model's own max_pixels
    the profiling run takes the room, at 512 tokens' worth it fits as asked."""
    asked = {"gpu_memory": 7 * GIB, "max_model_len": 32768}
    default = plan(QWEN2VL, **asked)
    assert not default.ok and "max-model-len-too-long" in [p.code for p in default.problems]
    assert default.memory.mm_profile > 0.5 * GIB
    small = plan(QWEN2VL, **asked, mm_kwargs=MmKwargs.parse('{"max_pixels": 401408}'))
    assert small.ok, small.problems
    assert small.memory.mm_profile == small.memory.recommended_mm_profile < 0.2 * GIB
    assert small.recommended.mm_processor_kwargs == {"max_pixels": 401408}
    # the memory is items x one image's: twice the pixels, twice the tokens, half the items
    double = plan(QWEN2VL, **asked, mm_kwargs=MmKwargs.parse('{"max_pixels": 802816}'))
    assert double.mm and small.mm
    assert double.mm.profiled_items * 2 == small.mm.profiled_items
    assert abs(double.memory.mm_profile - small.memory.mm_profile) < 0.01 * GIB


def test_no_images_no_profiling_and_the_limit_in_the_command() -> None:
    off = plan(QWEN2VL, gpu_memory=8 * GIB, mm_limits=MmLimits.parse('{"image": 0}'))
    assert off.mm is not None and off.mm.profiled_items_asked == 0
    assert off.memory.mm_profile == 0 and off.recommended.mm_processor_kwargs is None
    assert "--limit-mm-per-prompt '{\"image\": 0}'" in off.command
    two = plan(QWEN2VL, gpu_memory=8 * GIB, mm_limits=MmLimits.parse("image=2"))
    assert "--limit-mm-per-prompt '{\"image\": 2}'" in two.command  # JSON, as every vLLM takes


def test_a_prompt_of_every_image_must_fit_the_context() -> None:
    p = plan(QWEN2VL, gpu_memory=24 * GIB, max_model_len=8192,
             mm_limits=MmLimits.parse('{"image": 3}'))  # fmt: skip
    (found,) = [f for f in p.problems if f.code == "images-exceed-context"]
    assert found.severity.value == "warning" and "49152 tokens" in found.message


def test_key_value_limits_on_a_vllm_that_takes_json_only() -> None:
    limits = MmLimits.parse("image=2")
    new = plan(QWEN35, gpu_memory=48 * GIB, mm_limits=limits, vllm="0.17.1")
    assert any("takes --limit-mm-per-prompt only as JSON" in n for n in new.notes)
    old = plan(QWEN2VL, gpu_memory=24 * GIB, mm_limits=limits, vllm="0.8.5")
    assert not any("only as JSON" in n for n in old.notes)


def test_without_free_the_plan_says_it_assumed_the_whole_card(tmp_path: Path) -> None:
    args = ["--envs", str(ROOT / "envs"), "plan", "vllm-0.8.5+qwen2-vl", str(QWEN2VL)]
    assumed = envkit(*args, "--gpu", "rtx-4060", "--json", cwd=tmp_path).json()
    assert assumed["free_assumed"] is True
    (note,) = [n for n in assumed["notes"] if "assumed the whole card free" in n]
    assert "--free SIZE" in note and "memory.free" in note
    text = envkit(*args, "--gpu", "rtx-4060", cwd=tmp_path)
    assert "8.00 GiB free (assumed: no --free)" in text.out
    given = envkit(*args, "--gpu", "rtx-4060", "--free", "6.98GiB", "--json", cwd=tmp_path).json()
    assert given["free_assumed"] is False
    assert not any("assumed the whole card" in n for n in given["notes"])


def test_a_roomy_card_gets_a_shorter_context_before_a_higher_utilisation() -> None:
    """24 GiB, 131072 tokens asked: about 97k fit at 0.90; the plan keeps 0.90 and shortens
    the context, and names the higher utilisation second, for when that much is free."""
    p = plan(QWEN35, gpu_memory=24 * GIB, max_model_len=131072,
             mm_kwargs=MmKwargs.parse('{"max_pixels": 524288}'))  # fmt: skip
    assert p.recommended.gpu_memory_utilization == 0.9
    assert 4096 <= p.recommended.max_model_len < 131072
    (found,) = [f for f in p.problems if f.code == "max-model-len-too-long"]
    shorter = f"--max-model-len {p.recommended.max_model_len} (at utilisation 0.90)"
    assert found.fix.startswith(shorter) and ", or --gpu-memory-utilization 0.9" in found.fix
    # a small card, where 0.90 holds almost nothing, still gets the utilisation raised
    tight = plan(QWEN35, gpu_memory=20 * GIB, max_model_len=4096,
                 mm_kwargs=MmKwargs.parse('{"max_pixels": 524288}'))  # fmt: skip
    assert tight.recommended.gpu_memory_utilization > 0.9


def test_the_json_with_images_follows_the_schema(tmp_path: Path) -> None:
    from helpers import output

    res = envkit(
        "--envs", str(ROOT / "envs"), "plan", "vllm-0.8.5+qwen2-vl", str(QWEN2VL),
        "--gpu", "rtx-4060-laptop", "--limit-mm-per-prompt", '{"image": 2}',
        "--mm-processor-kwargs", '{"max_pixels": 401408, "min_pixels": 3136}', "--json",
        cwd=tmp_path,
    )  # fmt: skip
    data = output("plan", res.out)
    assert data["recommended"]["limit_mm_per_prompt"] == {"image": 2}
    assert data["recommended"]["mm_processor_kwargs"] == {"max_pixels": 401408, "min_pixels": 3136}
    assert data["mm"]["items_per_prompt"] == 2 and data["memory"]["mm_profile"] > 0
