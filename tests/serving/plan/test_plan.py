"""envkit plan: the memory formulas against hand-computed cases and the field reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envkit.errors import BadInput
from envkit.gpu.cards import GIB, parse_size
from envkit.serving.plan.memory_plan import PlanInput, make_plan
from envkit.serving.plan.shapes import (
    default_max_len,
    kv_bytes_per_token,
    parameters_from_shapes,
    shapes,
)

from helpers import ROOT, envkit
from registry_world import MODELS

PROFILE = "vllm-0.8.5+qwen2-vl"

# Qwen2.5-3B-Instruct and Qwen2.5-1.5B-Instruct, as their config.json files give them
QWEN25_3B = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 2048,
    "num_hidden_layers": 36,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "intermediate_size": 11008,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
    "max_position_embeddings": 32768,
    "torch_dtype": "bfloat16",
}
QWEN25_15B = {
    **QWEN25_3B,
    "hidden_size": 1536,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "intermediate_size": 8960,
}


def model_dir(tmp_path: Path, config: dict, name: str = "m") -> Path:  # type: ignore[type-arg]
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def plan_for(folder: Path, **kw):  # type: ignore[no-untyped-def]
    config = json.loads((folder / "config.json").read_text())
    return make_plan(config, folder, str(folder), PlanInput(model=folder, **kw))


def test_sizes() -> None:
    assert parse_size("8GiB") == 8 * GIB
    assert parse_size("6.98GiB") == int(6.98 * GIB)
    assert parse_size("24GB") == 24 * 10**9
    assert parse_size("512 MiB") == 512 * 1024**2
    for bad in ("eight", "8XB", "", "-1GiB"):
        with pytest.raises(BadInput):
            parse_size(bad)


def test_dense_model_by_hand(tmp_path: Path) -> None:
    config = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 1024,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "vocab_size": 1000,
        "intermediate_size": 4096,
        "torch_dtype": "float16",
        "max_position_embeddings": 2048,
        "tie_word_embeddings": False,
    }
    s = shapes(config)
    assert (s.kv_heads, s.head_dim) == (8, 128)  # no GQA: every head has its own K and V
    # per layer: q,k,v with biases 3*(1024*1024+1024), o 1024*1024, MLP 3*1024*4096, 2 norms
    per_layer = 3 * (1024 * 1024 + 1024) + 1024 * 1024 + 3 * 1024 * 4096 + 2 * 1024
    assert parameters_from_shapes(s) == 4 * per_layer + 2 * 1000 * 1024 + 1024
    # without the key, transformers ties input and output embeddings: one matrix less
    tied = shapes({k: v for k, v in config.items() if k != "tie_word_embeddings"})
    assert parameters_from_shapes(tied) == parameters_from_shapes(s) - 1000 * 1024
    assert kv_bytes_per_token(s, 2) == 2 * 4 * 8 * 128 * 2
    plan = plan_for(model_dir(tmp_path, config), gpu_memory=GIB * 2, utilization=0.5)
    assert plan.memory.weights == parameters_from_shapes(s) * 2
    room = int(0.5 * 2 * GIB) - plan.memory.weights - GIB
    assert room < 0 and not plan.ok  # 1 GiB budget, 1 GiB reserve: nothing left
    assert plan.problems[0].code == "no-room-for-kv-cache"


def test_report_2_three_b_model_on_an_8_gib_card(tmp_path: Path) -> None:
    folder = model_dir(tmp_path, QWEN25_3B)
    plan = plan_for(
        folder,
        gpu_memory=parse_size("8GiB"),
        free=parse_size("6.98GiB"),
        utilization=0.9,
        max_model_len=4096,
        dtype="float16",
    )
    assert not plan.ok
    assert plan.problems[0].code == "exceeds-free-memory"  # 0.9 x 8 = 7.2 > 6.98
    assert plan.numbers.highest_safe_utilization == 0.86
    assert plan.memory.kv_per_token == 2 * 36 * 2 * 128 * 2  # GQA: 2 KV heads
    weights = plan.memory.weights
    assert abs(weights / GIB - 5.75) < 0.01  # about 6 GiB of float16 weights
    # at 0.86 the KV cache gets 0.86*8 - 5.75 - 1 = 0.13 GiB: under 4096 tokens
    fits = (int(0.86 * 8 * GIB) - weights - GIB) // plan.memory.kv_per_token // 16 * 16
    assert plan.recommended.gpu_memory_utilization == 0.86
    assert plan.recommended.max_model_len == fits < 4096
    assert "--max-model-len 3840" in plan.command


def test_report_2_one_and_a_half_b_model_fits_at_the_recommendation(tmp_path: Path) -> None:
    folder = model_dir(tmp_path, QWEN25_15B)
    plan = plan_for(
        folder,
        gpu_memory=parse_size("8GiB"),
        free=parse_size("6.98GiB"),
        utilization=0.86,
        max_model_len=4096,
        dtype="float16",
    )
    assert plan.ok, plan.problems
    assert abs(plan.memory.weights / GIB - 2.88) < 0.01  # about 3 GiB
    assert plan.recommended.max_model_len == 4096
    room = int(0.86 * 8 * GIB) - plan.memory.weights - GIB
    assert plan.numbers.concurrency == round(room / (28672 * 4096), 2)
    assert plan.numbers.concurrency > 20


def test_hybrid_model_counts_only_full_attention_layers() -> None:
    config = json.loads((MODELS / "Qwen3.5-9B" / "config.json").read_text())
    s = shapes(config)
    assert (s.layers, s.full_attention_layers) == (32, 8)
    assert kv_bytes_per_token(s, 2) == 2 * 8 * 4 * 256 * 2
    plan = make_plan(
        config,
        MODELS / "Qwen3.5-9B",
        "Qwen3.5-9B",
        PlanInput(
            model=MODELS / "Qwen3.5-9B", gpu_memory=24 * GIB, max_model_len=10000, utilization=0.4
        ),
    )
    assert plan.memory.weights == 18819627488  # metadata.total_size, bfloat16 as served
    assert plan.numbers.weights_source == "model.safetensors.index.json"
    assert not plan.ok and plan.recommended.gpu_memory_utilization == 0.79
    assert any("hybrid model" in n for n in plan.notes)


def test_mla_latent_cache() -> None:
    config = {
        "model_type": "deepseek_v3",
        "hidden_size": 1024,
        "num_hidden_layers": 2,
        "num_attention_heads": 8,
        "vocab_size": 100,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
    }
    assert kv_bytes_per_token(shapes(config), 2) == 2 * (512 + 64) * 2


def test_vision_budgets_report_3() -> None:
    qwen2vl = json.loads((MODELS / "Qwen2-VL-2B-Instruct" / "config.json").read_text())
    plan = make_plan(
        qwen2vl,
        MODELS / "Qwen2-VL-2B-Instruct",
        "m",
        PlanInput(model=MODELS / "Qwen2-VL-2B-Instruct", gpu_memory=24 * GIB, max_model_len=8192),
    )
    assert plan.mm is not None
    assert plan.mm.max_image_tokens == 12845056 // (28 * 28) == 16384
    assert plan.recommended.mm_processor_kwargs == {"max_pixels": 512 * 28 * 28}
    qwen35 = json.loads((MODELS / "Qwen3.5-9B" / "config.json").read_text())
    plan = make_plan(
        qwen35,
        MODELS / "Qwen3.5-9B",
        "m",
        PlanInput(model=MODELS / "Qwen3.5-9B", gpu_memory=48 * GIB, max_model_len=10000),
    )
    assert plan.mm is not None and plan.mm.pixels_per_token == 32 * 32
    assert plan.mm.max_pixels == 16384 * 32 * 32 == 16_777_216  # about 4096 x 4096
    assert plan.recommended.mm_processor_kwargs == {"max_pixels": 524288}
    assert "--mm-processor-kwargs '{\"max_pixels\": 524288}'" in plan.command


def test_cli_json_shape_exit_codes_and_compose(tmp_path: Path) -> None:
    folder = model_dir(tmp_path, QWEN25_15B)
    args = [
        "--envs",
        str(ROOT / "envs"),
        "plan",
        PROFILE,
        str(folder),
        "--gpu-memory",
        "8GiB",
        "--free",
        "6.98GiB",
        "--max-model-len",
        "4096",
        "--dtype",
        "float16",
    ]
    res = envkit(*args, "--json", cwd=tmp_path)
    assert res.code == 1  # 0.9 asked, 0.86 is the most that starts
    data = res.json()
    assert set(data) >= {"ok", "problems", "memory", "recommended", "mm", "command"}
    assert data["recommended"]["gpu_memory_utilization"] == 0.86
    assert data["recommended"]["max_model_len"] == 4096
    assert data["command"].startswith(f"vllm serve {folder} --dtype float16")
    fits = envkit(*args, "--gpu-memory-utilization", "0.86", "--compose", cwd=tmp_path)
    fits.assert_ok()
    assert "It fits as asked: a 4096-token context at utilisation 0.86" in fits.out
    assert "image: vllm/vllm-openai:v0.8.5" in fits.out
    vl = envkit(
        "--envs",
        str(ROOT / "envs"),
        "plan",
        PROFILE,
        str(MODELS / "Qwen2-VL-2B-Instruct"),
        "--gpu-memory",
        "24GiB",
        "--json",
        cwd=tmp_path,
    ).json()
    assert vl["mm"]["max_image_tokens"] == 16384
    assert vl["recommended"]["mm_processor_kwargs"] == {"max_pixels": 401408}


@pytest.mark.parametrize(
    "extra",
    [
        ["--gpu-memory", "lots"],
        ["--gpu-memory", "8GiB", "--free", "9GiB"],
        ["--gpu-memory", "8GiB", "--gpu-memory-utilization", "1.5"],
    ],
)
def test_cli_bad_input(tmp_path: Path, extra: list[str]) -> None:
    folder = model_dir(tmp_path, QWEN25_15B)
    res = envkit("--envs", str(ROOT / "envs"), "plan", PROFILE, str(folder), *extra, cwd=tmp_path)
    assert res.code == 2 and "Traceback" not in res.err


def test_cli_config_without_shapes(tmp_path: Path) -> None:
    folder = model_dir(tmp_path, {"model_type": "llama", "architectures": ["X"]})
    res = envkit(
        "--envs",
        str(ROOT / "envs"),
        "plan",
        PROFILE,
        str(folder),
        "--gpu-memory",
        "8GiB",
        cwd=tmp_path,
    )
    assert res.code == 2 and "num_hidden_layers" in res.err


def test_plan_refuses_a_model_the_profile_cannot_load(tmp_path: Path) -> None:
    args = ["--envs", str(ROOT / "envs"), "plan", PROFILE, str(MODELS / "Qwen3.5-9B")]
    res = envkit(*args, "--gpu-memory", "80GiB", "--json", cwd=tmp_path)
    assert res.code == 1
    data = res.json()
    assert data["ok"] is False and data["command"] == ""
    codes = [p["code"] for p in data["problems"]]
    assert codes[:2] == ["unknown-model-type", "unsupported-architecture"]  # reasons first
    text = envkit(*args, "--gpu-memory", "80GiB", "--compose", cwd=tmp_path)
    assert text.out.startswith(f"{PROFILE} cannot load this model:")
    assert "vllm serve" not in text.out and "services:" not in text.out


def test_plan_knows_the_card(tmp_path: Path) -> None:
    """Report 2's RTX 2070: 8 GiB, compute capability 7.5, no bfloat16."""
    folder = model_dir(tmp_path, QWEN25_15B)
    args = ["--envs", str(ROOT / "envs"), "plan", PROFILE, str(folder), "--free", "6.98GiB"]
    res = envkit(
        *args, "--gpu", "GeForce RTX 2070", "--max-model-len", "4096", "--json", cwd=tmp_path
    )
    data = res.json()
    assert data["recommended"]["dtype"] == "half" and "--dtype half" in data["command"]
    assert data["recommended"]["gpu_memory_utilization"] == 0.86
    assert data["memory"]["total"] == 8 * GIB
    # asked for bfloat16 on that card: refused with the fix, and the plan is in half
    asked = envkit(
        *args, "--gpu-memory", "8GiB", "--compute-capability", "7.5", "--dtype", "bfloat16",
        "--json", cwd=tmp_path,
    ).json()  # fmt: skip
    assert "bfloat16-unsupported" in [p["code"] for p in asked["problems"]]
    assert asked["recommended"]["dtype"] == "half"
    # a card with bfloat16 keeps the checkpoint's dtype
    a10 = envkit(*args, "--gpu", "a10", "--json", cwd=tmp_path).json()
    assert a10["recommended"]["dtype"] == "bfloat16"
    bad = envkit(*args, "--gpu", "rtx-9999", cwd=tmp_path)
    assert bad.code == 2 and "is not a card envkit knows" in bad.err
    bad = envkit(*args, "--gpu-memory", "8GiB", "--compute-capability", "seven", cwd=tmp_path)
    assert bad.code == 2 and "--compute-capability" in bad.err
    assert envkit(*args, cwd=tmp_path).code == 2  # no GPU given at all


def test_asked_and_recommended_side_by_side_in_one_table(tmp_path: Path) -> None:
    """Report 2's 3B model: the problems speak of the utilisation asked, the summary of the
    recommended one; both columns are in the one table, so no number stands unlabelled."""
    folder = model_dir(tmp_path, QWEN25_3B)
    res = envkit(
        "--envs", str(ROOT / "envs"), "plan", PROFILE, str(folder), "--gpu-memory", "8GiB",
        "--free", "6.98GiB", "--max-model-len", "4096", "--dtype", "float16", cwd=tmp_path,
    )  # fmt: skip
    lines = res.out.splitlines()
    assert next(ln for ln in lines if "AS ASKED" in ln).split() == [
        "AS", "ASKED", "RECOMMENDED", "HOW"
    ]  # fmt: skip
    rows = {ln.split("  ")[0]: ln.split() for ln in lines if not ln.startswith(" ")}
    assert rows["utilisation"][1:3] == ["0.90", "0.86"]
    assert rows["vLLM asks"][2:6] == ["7.20", "GiB", "6.88", "GiB"]  # 0.9 x 8, 0.86 x 8
    assert rows["KV cache"][2:6] == ["0.45", "GiB", "0.13", "GiB"]  # the two of the issue
    assert rows["context"][1:5] == ["4096", "tokens", "3840", "tokens"]
    assert "asked (--max-model-len)" in " ".join(rows["context"])
    assert "0.9 x 8.00 GiB = 7.20 GiB is more than the 6.98 GiB free" in " ".join(res.out.split())


# Real shapes, as the public checkpoints' config.json files give them (transformers writes
# only what differs from the config class's defaults: Gemma 3's text_config is sparse)
QWEN25_VL_7B = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"],
    "model_type": "qwen2_5_vl",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "max_position_embeddings": 128000,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vision_config": {
        "depth": 32,
        "hidden_act": "silu",
        "hidden_size": 1280,
        "intermediate_size": 3420,
        "num_heads": 16,
        "in_chans": 3,
        "out_hidden_size": 3584,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "spatial_patch_size": 14,
        "window_size": 112,
        "fullatt_block_indexes": [7, 15, 23, 31],
        "tokens_per_second": 2,
        "temporal_patch_size": 2,
    },
}
QWEN25_VL_3B = {
    **QWEN25_VL_7B,
    "hidden_size": 2048,
    "intermediate_size": 11008,
    "num_hidden_layers": 36,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
    "vision_config": {**QWEN25_VL_7B["vision_config"], "out_hidden_size": 2048},  # type: ignore[dict-item]
}
SIGLIP = {
    "hidden_size": 1152,
    "image_size": 896,
    "intermediate_size": 4304,
    "model_type": "siglip_vision_model",
    "num_attention_heads": 16,
    "num_hidden_layers": 27,
    "patch_size": 14,
    "vision_use_head": False,
}


def gemma3(hidden: int, intermediate: int, layers: int, **text: object) -> dict[str, object]:
    return {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "mm_tokens_per_image": 256,
        "text_config": {
            "hidden_size": hidden,
            "intermediate_size": intermediate,
            "model_type": "gemma3_text",
            "num_hidden_layers": layers,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
            "sliding_window": 1024,
            **text,
        },
        "torch_dtype": "bfloat16",
        "vision_config": SIGLIP,
    }


QWEN2_AUDIO_7B = {
    "architectures": ["Qwen2AudioForConditionalGeneration"],
    "model_type": "qwen2_audio",
    "audio_config": {
        "model_type": "qwen2_audio_encoder",
        "d_model": 1280,
        "encoder_layers": 32,
        "encoder_attention_heads": 20,
        "encoder_ffn_dim": 5120,
        "num_mel_bins": 128,
        "max_source_positions": 1500,
    },
    "text_config": {
        "model_type": "qwen2",
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "vocab_size": 156032,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": False,
    },
    "torch_dtype": "bfloat16",
}


def _config(name: str) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((MODELS / name / "config.json").read_text())
    return loaded


# The published parameter counts of the checkpoints (their model cards' safetensors
# totals; Qwen3.5-9B's is the fixture index's metadata.total_parameters)
@pytest.mark.parametrize(
    ("name", "config", "published"),
    [
        ("Qwen2-VL-2B-Instruct", _config("Qwen2-VL-2B-Instruct"), 2_208_985_600),
        ("Qwen2.5-VL-3B-Instruct", QWEN25_VL_3B, 3_754_622_976),
        ("Qwen2.5-VL-7B-Instruct", QWEN25_VL_7B, 8_292_166_656),
        ("gemma-3-4b-it", gemma3(2560, 10240, 34), 4_300_079_472),
        ("gemma-3-12b-it", gemma3(3840, 15360, 48, num_attention_heads=16,
                                  num_key_value_heads=8), 12_187_325_040),
        ("gemma-3-27b-it", gemma3(5376, 21504, 62, num_attention_heads=32,
                                  num_key_value_heads=16, head_dim=128,
                                  query_pre_attn_scalar=168), 27_432_406_640),
        ("Qwen2-Audio-7B-Instruct", QWEN2_AUDIO_7B, 8_397_094_912),
        ("Qwen3.5-9B", _config("Qwen3.5-9B"), 9_409_813_744),
    ],
)  # fmt: skip
def test_towers_are_counted_within_ten_percent_of_the_checkpoint(
    tmp_path: Path, name: str, config: dict[str, object], published: int
) -> None:
    """Without a safetensors index, the weights are the language model plus every tower
    config.json describes (vision, audio), at the served dtype: within 10 % of the real
    checkpoint (these land within 0.1 %)."""
    folder = model_dir(tmp_path, config, name)  # config.json alone: no index to read
    plan = plan_for(folder, gpu_memory=parse_size("80GiB"), max_model_len=4096)
    assert plan.numbers.weights_source.startswith("estimated from config.json shapes: text ")
    counted = plan.memory.weights // 2  # bfloat16
    assert abs(counted - published) / published < 0.10, (counted, published)
    assert abs(counted - published) / published < 0.001, (counted, published)
    tower = "audio tower" if "audio" in name.lower() else "vision tower"
    assert tower in plan.numbers.weights_source


@pytest.mark.parametrize(
    ("text", "length", "how"),
    [
        ({"max_position_embeddings": 32768}, 32768, "max_position_embeddings of config.json"),
        ({"max_position_embeddings": 32768, "n_positions": 2048}, 2048, "n_positions"),
        ({"max_position_embeddings": 8192, "model_max_length": 16384}, 16384, "model_max_length"),
        ({}, 2048, "vLLM's default when config.json names no length: 2048"),
        ({"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 2.0}},
         8192, "x rope factor 2"),
        ({"max_position_embeddings": 32768, "rope_scaling": {
            "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}},
         131072, "original_max_position_embeddings of its yarn rope_scaling x rope factor 4"),
        ({"max_position_embeddings": 131072, "rope_scaling": {
            "rope_type": "llama3", "factor": 8.0}}, 131072, "max_position_embeddings"),
        ({"max_position_embeddings": 128000, "rope_scaling": {
            "type": "mrope", "mrope_section": [16, 24, 24]}}, 128000, "max_position_embeddings"),
    ],
)  # fmt: skip
def test_vllms_default_context_as_vllm_derives_it(
    text: dict[str, object], length: int, how: str
) -> None:
    found, said = default_max_len({"model_type": "llama", **text})
    assert found == length and how in said


def test_without_max_model_len_the_plan_takes_vllms_default_and_says_so(tmp_path: Path) -> None:
    gemma = model_dir(tmp_path, gemma3(2560, 10240, 34), "gemma")
    plan = plan_for(gemma, gpu_memory=parse_size("24GiB"))
    # Gemma3TextConfig's default length, which vLLM does not scale again by the rope factor
    assert plan.numbers.max_model_len == 131072
    assert plan.numbers.max_model_len_source == (
        "not asked: vLLM's default, max_position_embeddings of config.json"
    )
    # the recommendation never exceeds the context vLLM would accept
    assert plan.recommended.max_model_len <= 131072
    text = envkit(
        "--envs", str(ROOT / "envs"), "plan", "vllm-0.33.0", str(MODELS / "Qwen3.5-9B"),
        "--gpu-memory", "21GiB", "--mm-processor-kwargs", '{"max_pixels": 524288}', cwd=tmp_path,
    )  # fmt: skip
    flat = " ".join(text.out.split())
    assert "context 32768 tokens" in flat and "not asked: vLLM's default" in flat
    assert "vLLM's default context, 32768 tokens (max_position_embeddings of config.json)" in flat


@pytest.mark.parametrize(
    ("case", "extra", "code", "exit_code"),
    [
        ("fits", ["--gpu-memory-utilization", "0.86"], "plan-fits", 0),
        ("asked too much", [], "plan-does-not-fit", 1),
        ("nothing fits", ["--gpu-memory", "2GiB", "--free", "2GiB"], "plan-does-not-fit", 1),
        ("cannot load", [], "plan-model-does-not-load", 1),
    ],
)
def test_the_verdict_is_one_result_and_the_text_says_its_message(
    tmp_path: Path, case: str, extra: list[str], code: str, exit_code: int
) -> None:
    """The plan's verdict is one Result in --json (the schema requires it) and the text's
    verdict line is that result's message: the two cannot disagree. It fails exactly when
    the command exits 1; its fix is the recommended command when one fits, else the
    problems' own fixes; its evidence the context and utilisation it was judged at."""
    from envkit.results import Result

    from helpers import output

    folder = MODELS / "Qwen3.5-9B" if case == "cannot load" else model_dir(tmp_path, QWEN25_15B)
    args = ["--envs", str(ROOT / "envs"), "plan", PROFILE, str(folder), "--gpu-memory",
            "8GiB", "--free", "6.98GiB", "--max-model-len", "4096", "--dtype", "float16",
            *extra]  # fmt: skip
    as_json = envkit(*args, "--json", cwd=tmp_path)
    data = output("plan", as_json.out)
    result = Result.from_dict(data["result"])
    assert (result.code, result.failed, as_json.code) == (code, exit_code == 1, exit_code)
    assert data["ok"] is not result.failed and result.subject == str(folder)
    failing = [p for p in data["problems"] if p["severity"] == "error"]
    if code == "plan-model-does-not-load":  # the profile's reasons alone: no setting fixes them
        assert data["command"] == "" and not data["profile"]["ok"]
        said = Result.from_dict(data["profile"]["result"])
        assert said.code == "model-does-not-load"
        assert said.fact("problems") == result.fact("problems")
        assert result.facts("problems") == ("unknown-model-type", "unsupported-architecture")
        assert result.fix == said.fix and len(result.steps) == 2
    else:
        assert result.facts("problems") == tuple(dict.fromkeys(p["code"] for p in failing))
        rec = data["recommended"]
        assert result.fact("max_model_len") == "4096"
        assert result.fact("max_model_len_that_fits_asked") == str(
            data["max_model_len_that_fits_asked"]
        )
        assert result.fact("recommended_utilization") == f"{rec['gpu_memory_utilization']:.2f}"
    if code == "plan-fits":
        assert result.fix == "" and "It fits as asked" in result.message
    if case == "asked too much":
        assert result.fix == data["command"] != "" and "0.86" in result.message
    if case == "nothing fits":
        assert data["command"] == "" and "no setting fits" in result.message
        assert result.steps == tuple(dict.fromkeys(p["fix"] for p in failing))
    text = envkit(*args, cwd=tmp_path)
    assert text.code == exit_code
    lines = text.out.splitlines()
    # nothing is recommended where no setting fits: the column says it is the best tried
    head = next(ln for ln in lines if "AS ASKED" in ln)
    assert ("BEST TRIED" in head) == (data["recommended"]["max_model_len"] == 0)
    assert result.message in lines
    # the verdict line comes after the problems, and only the command follows it
    assert lines[lines.index(result.message) + 1 :] == (
        [f"recommended: {data['command']}"] if data["command"] else []
    )
