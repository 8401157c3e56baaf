"""The model configs compat_runtime.py writes for vLLM's config loader, and the architectures
whose classes it imports beyond the registry's own list.

Written here in the shapes checkpoints carry (field names from the shared fixtures'
config.json files and transformers' config classes; sizes small but real): plain 4.x-era
files (``torch_dtype``, ``rope_scaling``) for the older model types and a 5.x-era one
(``dtype``, ``rope_parameters``, nested ``text_config``) for qwen3_5.
"""

from __future__ import annotations

from typing import Any

_TEXT = {
    "hidden_act": "silu",
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_attention_heads": 14,
    "num_hidden_layers": 24,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-06,
    "initializer_range": 0.02,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "vocab_size": 151936,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
}


def _qwen3_5() -> dict[str, Any]:
    layers = ["linear_attention"] * 3 + ["full_attention"]
    text = {
        "model_type": "qwen3_5_text",
        "attention_bias": False,
        "head_dim": 256,
        "hidden_act": "silu",
        "hidden_size": 1024,
        "intermediate_size": 3584,
        "layer_types": layers * 6,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 16,
        "linear_value_head_dim": 128,
        "max_position_embeddings": 32768,
        "num_attention_heads": 8,
        "num_hidden_layers": 24,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06,
        "rope_parameters": {
            "partial_rotary_factor": 0.25,
            "rope_theta": 10000.0,
            "rope_type": "default",
        },
        "vocab_size": 248320,
    }
    vision = {
        "model_type": "qwen3_5_vision",
        "depth": 12,
        "hidden_act": "gelu_pytorch_tanh",
        "hidden_size": 768,
        "in_channels": 3,
        "intermediate_size": 3072,
        "num_heads": 12,
        "num_position_embeddings": 2304,
        "out_hidden_size": 1024,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
    }
    return {
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        "dtype": "bfloat16",
        "image_token_id": 248056,
        "video_token_id": 248057,
        "vision_start_token_id": 248053,
        "vision_end_token_id": 248054,
        "tie_word_embeddings": False,
        "transformers_version": "5.20.2",
        "text_config": text,
        "vision_config": vision,
    }


# model type -> (architecture, config.json). llama and qwen2 are the plain text models
# every release loads: their config load is vLLM's config loader as a whole.
CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "llama": (
        "LlamaForCausalLM",
        {
            **_TEXT,
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "attention_bias": False,
            "mlp_bias": False,
            "head_dim": 64,
            "num_attention_heads": 16,
            "hidden_size": 1024,
            "rope_theta": 500000.0,
            "rope_scaling": {
                "factor": 32.0,
                "high_freq_factor": 4.0,
                "low_freq_factor": 1.0,
                "original_max_position_embeddings": 8192,
                "rope_type": "llama3",
            },
            "vocab_size": 128256,
            "bos_token_id": 128000,
            "eos_token_id": 128009,
            "transformers_version": "4.45.0",
        },
    ),
    "qwen2": (
        "Qwen2ForCausalLM",
        {
            **_TEXT,
            "architectures": ["Qwen2ForCausalLM"],
            "model_type": "qwen2",
            "rope_theta": 1000000.0,
            "sliding_window": 32768,
            "use_sliding_window": False,
            "max_window_layers": 21,
            "attention_dropout": 0.0,
            "transformers_version": "4.43.1",
        },
    ),
    "qwen3": (
        "Qwen3ForCausalLM",
        {
            **_TEXT,
            "architectures": ["Qwen3ForCausalLM"],
            "model_type": "qwen3",
            "head_dim": 128,
            "hidden_size": 1024,
            "intermediate_size": 3072,
            "num_attention_heads": 16,
            "num_hidden_layers": 28,
            "num_key_value_heads": 8,
            "attention_bias": False,
            "rope_theta": 1000000.0,
            "rope_scaling": None,
            "sliding_window": None,
            "use_sliding_window": False,
            "max_window_layers": 28,
            "transformers_version": "4.51.0",
        },
    ),
    "qwen2_vl": (
        "Qwen2VLForConditionalGeneration",
        {
            **_TEXT,
            "architectures": ["Qwen2VLForConditionalGeneration"],
            "model_type": "qwen2_vl",
            "hidden_size": 1536,
            "intermediate_size": 8960,
            "num_attention_heads": 12,
            "num_hidden_layers": 28,
            "max_window_layers": 28,
            "rope_theta": 1000000.0,
            "sliding_window": 32768,
            "use_sliding_window": False,
            "vision_start_token_id": 151652,
            "vision_end_token_id": 151653,
            "vision_token_id": 151654,
            "image_token_id": 151655,
            "video_token_id": 151656,
            "vision_config": {
                "depth": 32,
                "embed_dim": 1280,
                "mlp_ratio": 4,
                "num_heads": 16,
                "in_chans": 3,
                "hidden_size": 1536,
                "patch_size": 14,
                "spatial_merge_size": 2,
                "spatial_patch_size": 14,
                "temporal_patch_size": 2,
            },
            "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
            "transformers_version": "4.41.2",
        },
    ),
    "gemma3": (
        "Gemma3ForConditionalGeneration",
        {
            "architectures": ["Gemma3ForConditionalGeneration"],
            "model_type": "gemma3",
            "boi_token_index": 255999,
            "eoi_token_index": 256000,
            "eos_token_id": [1, 106],
            "image_token_index": 262144,
            "initializer_range": 0.02,
            "mm_tokens_per_image": 256,
            "text_config": {
                "model_type": "gemma3_text",
                "hidden_size": 2560,
                "intermediate_size": 10240,
                "num_hidden_layers": 34,
                "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                "sliding_window": 1024,
            },
            "vision_config": {
                "model_type": "siglip_vision_model",
                "hidden_size": 1152,
                "image_size": 896,
                "intermediate_size": 4304,
                "num_attention_heads": 16,
                "num_hidden_layers": 27,
                "patch_size": 14,
                "vision_use_head": False,
            },
            "torch_dtype": "bfloat16",
            "transformers_version": "4.50.0.dev0",
        },
    ),
    "qwen3_5": ("Qwen3_5ForConditionalGeneration", _qwen3_5()),
    # vLLM's own DbrxConfig (registered for model type dbrx) up to the releases that take
    # transformers' one: its sub-configs' from_pretrained use a 4.x PretrainedConfig helper
    "dbrx": (
        "DbrxForCausalLM",
        {
            "architectures": ["DbrxForCausalLM"],
            "model_type": "dbrx",
            "attn_config": {"clip_qkv": 8, "kv_n_heads": 8, "model_type": "", "rope_theta": 500000},
            "d_model": 6144,
            "emb_pdrop": 0.0,
            "ffn_config": {
                "ffn_hidden_size": 10752,
                "model_type": "",
                "moe_jitter_eps": 0,
                "moe_loss_weight": 0.05,
                "moe_num_experts": 16,
                "moe_top_k": 4,
            },
            "initializer_range": 0.02,
            "max_seq_len": 32768,
            "n_heads": 48,
            "n_layers": 40,
            "output_router_logits": False,
            "resid_pdrop": 0.0,
            "router_aux_loss_coef": 0.05,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "use_cache": True,
            "vocab_size": 100352,
            "transformers_version": "4.38.2",
        },
    ),
}
VLLM_WIDE_CONFIGS = ("llama", "qwen2")
# architectures whose class is imported without a config: model files that import
# transformers' own model code (audio towers, omni models, vision processors)
CLASS_ONLY = (
    "Qwen2_5_VLForConditionalGeneration",
    "Qwen2AudioForConditionalGeneration",
    "Qwen2_5OmniThinkerForConditionalGeneration",
    "MiniCPMO",
    "WhisperForConditionalGeneration",
    "LlavaForConditionalGeneration",
    "Llama4ForConditionalGeneration",
    "Gemma3nForConditionalGeneration",
)


def model_type_of(arch: str) -> str | None:
    return next((t for t, (a, _c) in CONFIGS.items() if a == arch), None)
