"""What a model's own files say about its size: layer and head shapes from config.json
(with the names GPT-2, Falcon or T5-style configs use), the parameter count they imply, the
KV cache bytes per token, and the largest image a vision model's processor accepts. Every
number is checked where it enters (:func:`whole`): BadInput naming the file, field and value."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envkit.errors import BadInput
from envkit.io.files import present

DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "float16": 2,
    "half": 2,
    "bfloat16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "int8": 1,
}
MAX_COUNT = 2**31  # the largest layer count, width or vocabulary a config.json may state


_FIX = "Fix the file, or use the checkpoint's own one."


def shown(value: Any) -> str:
    """A value from a model file as a message shows it: JSON, cut short."""
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def table(config: dict[str, Any], key: str, source: str) -> dict[str, Any]:
    """The object at ``key`` ({} when missing or null); BadInput naming the file, the
    field's path and its value when it is anything else (``text_config: "oops"``)."""
    value = config.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadInput(f"{source}: {key} is {shown(value)}, not an object.", _FIX)
    return value


def inner_config(config: dict[str, Any], source: str = "config.json") -> tuple[str, dict[str, Any]]:
    """The text model's own settings of a multimodal config (``text_config``, or
    InternVL's ``llm_config``) and their key; ("", {}) when it has none."""
    for key in ("text_config", "llm_config"):
        found = table(config, key, source)
        if found:
            return key, found
    return "", {}


def layer_kinds(text: dict[str, Any], source: str, path: str = "") -> tuple[str, ...]:
    """``layer_types`` (hybrid models: which layers are full attention), checked: a list
    of names; () when missing."""
    kinds = text.get("layer_types")
    if kinds is None:
        return ()
    if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
        raise BadInput(
            f"{source}: {path}layer_types is {shown(kinds)}, not a list of layer kinds "
            '(such as "full_attention").',
            _FIX,
        )
    return tuple(kinds)


# What transformers' config class fills in for fields a checkpoint's config.json leaves out
# (it writes only those that differ from the class's defaults): Gemma3TextConfig's, from
# transformers 4.51.3's configuration_gemma3.py (google/gemma-3-4b-it's text_config names
# only its widths and depth).
CLASS_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {
        "vocab_size": 262_208,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "max_position_embeddings": 131_072,
        "tie_word_embeddings": True,
    },
}
TEXT_MODEL_TYPES = {"gemma3": "gemma3_text"}  # the text config's type when it is not said


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The language model's config: ``text_config`` (or ``llm_config``) over the top level,
    with the config class's defaults for the fields the file leaves out."""
    inner = config.get("text_config") or config.get("llm_config")
    merged = {**config, **inner} if isinstance(inner, dict) else dict(config)
    kind = inner.get("model_type") if isinstance(inner, dict) else None
    kind = kind or TEXT_MODEL_TYPES.get(str(config.get("model_type")), config.get("model_type"))
    return {**CLASS_DEFAULTS.get(str(kind), {}), **merged, "model_type": kind}


# vLLM's _get_and_verify_max_len (vllm/config.py): the length keys it reads, in its order
MAX_LEN_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)


def default_max_len(config: dict[str, Any], source: str = "config.json") -> tuple[int, str]:
    """The context vLLM serves when ``--max-model-len`` is not given, derived as vLLM's
    ``_get_and_verify_max_len`` does: the smallest length key of the text config
    (``model_max_length`` wins when set), else 2048; then times the RoPE scaling factor
    unless the rope type is su, longrope or llama3 (yarn: of the original length), never for
    Gemma 3. Returns it and how it was derived, in words."""
    text = text_config(config)
    inner_key, inner = inner_config(config, source)  # checked: an object, or nothing

    def at(key: str) -> str:
        return f"{inner_key}." if key in inner else ""

    found = {k: whole(text, k, source, path=at(k)) for k in MAX_LEN_KEYS if text.get(k) is not None}
    if "model_max_length" in found:
        key = "model_max_length"
    elif found:
        key = min(found, key=lambda k: found[k])
    else:
        return 2048, "vLLM's default when config.json names no length: 2048"
    length, how = found[key], f"{key} of config.json"
    rope = text.get("rope_scaling") or text.get("rope_parameters")
    if isinstance(rope, dict) and "gemma3" not in str(text.get("model_type")):
        nested = rope and all(isinstance(v, dict) for v in rope.values())
        factor = 1.0
        for rp in rope.values() if nested else [rope]:
            kind = rp.get("rope_type") or rp.get("type")
            if kind not in ("su", "longrope", "llama3", "mrope"):
                value = rp.get("factor", factor)
                factor = float(value) if isinstance(value, (int, float)) else factor
                if kind == "yarn":
                    length = whole(rp, "original_max_position_embeddings", f"{source} rope")
                    how = "original_max_position_embeddings of its yarn rope_scaling"
        if not 0 < factor <= 1024:
            raise BadInput(f"{source}: the rope scaling factor {factor:g} is not a factor.")
        if factor != 1.0:
            length, how = int(length * factor), f"{how} x rope factor {factor:g}"
    return length, how


@dataclass(frozen=True, kw_only=True)
class Shapes:
    layers: int
    full_attention_layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    intermediate: int
    tied: bool
    mla_width: int  # kv_lora_rank + qk_rope_head_dim, 0 when not MLA
    experts: int
    moe_intermediate: int
    dtype: str
    linear_layer: int = 0  # parameters of one linear-attention layer's mixer (hybrid models)
    query_gate: bool = False  # q_proj also yields an output gate (Qwen3-Next, Qwen3.5)


# the model types whose attention doubles q_proj for its output gate, in transformers' code
QUERY_GATED = ("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text")


def _linear_mixer(text: dict[str, Any], hidden: int, source: str) -> int:
    """One Gated DeltaNet mixer (``linear_*`` keys): in_proj_qkv, in_proj_z, in_proj_b/a, a
    depthwise conv1d, dt_bias and A_log, a gated norm, out_proj (modeling_qwen3_5.py)."""
    if text.get("linear_num_value_heads") is None:
        return 0

    def num(key: str) -> int:
        return whole(text, key, source)

    keys = num("linear_num_key_heads") * num("linear_key_head_dim")
    value_heads, head_v = num("linear_num_value_heads"), num("linear_value_head_dim")
    values = value_heads * head_v
    conv = (2 * keys + values) * num("linear_conv_kernel_dim")
    return (
        hidden * (2 * keys + values)
        + 2 * hidden * values
        + 2 * hidden * value_heads
        + (conv + 2 * value_heads + head_v)
    )


_ALIASES = {
    "num_hidden_layers": ("n_layer", "num_layers", "n_layers"),
    "num_attention_heads": ("n_head", "num_heads", "n_heads"),
    "hidden_size": ("n_embd", "d_model", "dim"),
    "num_key_value_heads": ("num_kv_heads", "n_head_kv", "multi_query_group_num"),
    "intermediate_size": ("ffn_dim", "n_inner", "ffn_hidden_size"),
}
_EXPERTS = ("n_routed_experts", "num_local_experts")


def whole(
    table: dict[str, Any],
    key: str,
    source: str,
    *,
    default: int | None = None,
    minimum: int = 1,
    maximum: int = MAX_COUNT,
    names: tuple[str, ...] = (),
    path: str = "",
) -> int:
    """A whole number from a model file, checked where it enters: BadInput naming the file,
    the field's path (``path``, e.g. ``text_config.``) and value when it is missing, not a
    whole number, or out of range."""
    found = next(((k, table[k]) for k in (key, *names) if table.get(k) is not None), None)
    if found is None:
        if default is not None:
            return default
        raise BadInput(f"{source} has no usable {path}{key!r} for the memory plan.")
    field, value = found
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadInput(f"{source}: {path}{field} is {shown(value)}, not a whole number.", _FIX)
    if not minimum <= value <= maximum:
        raise BadInput(
            f"{source}: {path}{field} is {shown(value)}; it must be a whole number from "
            f"{minimum} to {maximum:,}.",
            _FIX,
        )
    return value


def shapes(config: dict[str, Any], source: str = "config.json") -> Shapes:
    """The shapes the memory plan needs, every value's type and range checked: BadInput
    naming the file, the field's path and its value."""
    inner_key, inner = inner_config(config, source)  # checked: an object, or nothing
    text = text_config(config)  # with the config class's defaults for what the file leaves out

    def where(*keys: str) -> str:
        """The path prefix of the first of ``keys`` the config sets: inside text_config?"""
        return f"{inner_key}." if any(inner.get(k) is not None for k in keys) else ""

    def num(key: str, default: int | None = None, minimum: int = 1) -> int:
        # GPT-2/Falcon/T5-style configs name the same shapes differently
        names = _ALIASES.get(key, ())
        return whole(
            text, key, source, default=default, minimum=minimum, names=names,
            path=where(key, *names),
        )  # fmt: skip

    layers = num("num_hidden_layers")
    heads = num("num_attention_heads")
    hidden = num("hidden_size")
    kinds = layer_kinds(text, source, where("layer_types"))
    full = sum(1 for k in kinds if "full" in k or k == "attention") if kinds else layers
    dtype_key = next((k for k in ("dtype", "torch_dtype") if text.get(k)), "torch_dtype")
    dtype = text.get(dtype_key) or "bfloat16"
    if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
        raise BadInput(
            f"{source}: {where(dtype_key)}{dtype_key} {shown(dtype)} is not a dtype vLLM "
            "serves (float16, bfloat16, float32).",
            "Fix the file, or pass --dtype float16 or bfloat16.",
        )
    tied = text.get("tie_word_embeddings", True)
    if not isinstance(tied, bool):
        raise BadInput(
            f"{source}: {where('tie_word_embeddings')}tie_word_embeddings is {shown(tied)}, "
            "not true or false.",
            _FIX,
        )
    mla = 0
    if text.get("kv_lora_rank") is not None:
        mla = num("kv_lora_rank") + num("qk_rope_head_dim", 0, minimum=0)
    head_dim = num("head_dim", hidden // heads)
    if head_dim < 1:
        raise BadInput(
            f"{source}: hidden_size {hidden} over num_attention_heads {heads} leaves no "
            "head dimension.",
            "Fix the file, or use the checkpoint's own one.",
        )
    return Shapes(
        layers=layers,
        full_attention_layers=full,
        hidden=hidden,
        heads=heads,
        kv_heads=num("num_key_value_heads", heads),
        head_dim=head_dim,
        vocab=num("vocab_size"),
        intermediate=num("intermediate_size", 4 * hidden),
        tied=tied,
        mla_width=mla,
        experts=whole(
            text,
            "num_experts",
            source,
            default=0,
            minimum=0,
            names=_EXPERTS,
            path=where("num_experts", *_EXPERTS),
        ),
        moe_intermediate=num("moe_intermediate_size", 0, minimum=0),
        dtype=dtype,
        linear_layer=_linear_mixer(text, hidden, source) if full != layers else 0,
        query_gate=str(text.get("model_type")) in QUERY_GATED,
    )


def parameters_from_shapes(s: Shapes) -> int:
    """Parameter count of a decoder (attention with biases on q/k/v as Qwen2 has them,
    a gated MLP, two norms per layer); MoE layers count every expert; a hybrid model's
    linear-attention layers count their own mixer. Embeddings are tied unless
    ``tie_word_embeddings`` is false (transformers' default is true). Only an estimate for
    other layouts (GPT-2's ungated MLP): the safetensors index is exact."""
    q = s.heads * s.head_dim
    kv = s.kv_heads * s.head_dim
    attention = s.hidden * q + q + 2 * (s.hidden * kv + kv) + q * s.hidden
    if s.query_gate:
        attention += s.hidden * q  # the gate half of q_proj
    if s.experts:
        mlp = s.experts * 3 * s.hidden * (s.moe_intermediate or s.intermediate)
        mlp += s.experts * s.hidden  # router
    else:
        mlp = 3 * s.hidden * s.intermediate
    linear = s.layers - s.full_attention_layers if s.linear_layer else 0
    mixers = (s.layers - linear) * attention + linear * s.linear_layer
    embeddings = s.vocab * s.hidden * (1 if s.tied else 2)
    return mixers + s.layers * (mlp + 2 * s.hidden) + embeddings + s.hidden


def kv_bytes_per_token(s: Shapes, kv_dtype_bytes: int) -> int:
    if s.mla_width:
        return s.full_attention_layers * s.mla_width * kv_dtype_bytes
    return 2 * s.full_attention_layers * s.kv_heads * s.head_dim * kv_dtype_bytes


@dataclass(frozen=True, kw_only=True)
class Vision:
    pixels_per_token: int
    max_pixels: int
    source: str
    patch: int = 14  # pixels per patch side: a token covers (pixels_per_token / patch^2) patches

    @property
    def max_image_tokens(self) -> int:
        return self.max_pixels // self.pixels_per_token


def vision(model: Path, config: dict[str, Any]) -> Vision | None:
    """The largest image vLLM profiles with, from preprocessor_config.json / vision_config."""
    has_vision_config = config.get("vision_config") is not None
    vc = table(config, "vision_config", "config.json")
    pre: dict[str, Any] = {}
    pre_path = model / "preprocessor_config.json"
    if present(pre_path):
        pre = json_object(pre_path)
    if not has_vision_config and not pre:
        return None
    where, cfg, in_vc = str(pre_path), "config.json", "vision_config."
    patch = whole(pre, "patch_size", where, default=0) or whole(
        vc, "patch_size", cfg, default=14, path=in_vc
    )
    merge = whole(pre, "merge_size", where, default=0) or whole(
        vc, "spatial_merge_size", cfg, default=2, path=in_vc
    )
    per_token = (patch * merge) ** 2
    size = table(pre, "size", where)
    max_pixels = whole(pre, "max_pixels", where, default=0) or whole(
        size, "longest_edge", where, default=0, names=("max_pixels",), path="size."
    )
    source = (
        "preprocessor_config.json max_pixels"
        if max_pixels
        else "the processor default: 16384 vision tokens"
    )
    if not max_pixels:
        max_pixels = 16384 * per_token
    return Vision(pixels_per_token=per_token, max_pixels=max_pixels, source=source, patch=patch)


def json_object(path: Path) -> dict[str, Any]:
    """A model file that must hold a JSON object, read within the same limits as config.json."""
    from envkit.models.check_model import load_json, read_model_text

    data = load_json(read_model_text(path), str(path))
    if not isinstance(data, dict):
        raise BadInput(f"{path} holds a JSON {type(data).__name__}, not an object.")
    return data
