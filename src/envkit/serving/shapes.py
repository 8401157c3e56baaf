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
    inner_key, inner = inner_config(config, source)
    text = {**config, **inner} if inner else config

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
    )


def parameters_from_shapes(s: Shapes) -> int:
    """Parameter count of a decoder (attention with biases on q/k/v as Qwen2 has them,
    a gated MLP, two norms per layer); MoE layers count every expert. Embeddings are tied
    unless ``tie_word_embeddings`` is false (transformers' default is true). Only an
    estimate for other layouts (GPT-2's ungated MLP): the safetensors index is exact."""
    q = s.heads * s.head_dim
    kv = s.kv_heads * s.head_dim
    attention = s.hidden * q + q + 2 * (s.hidden * kv + kv) + q * s.hidden
    if s.experts:
        mlp = s.experts * 3 * s.hidden * (s.moe_intermediate or s.intermediate)
        mlp += s.experts * s.hidden  # router
    else:
        mlp = 3 * s.hidden * s.intermediate
    per_layer = attention + mlp + 2 * s.hidden
    embeddings = s.vocab * s.hidden * (1 if s.tied else 2)
    return s.layers * per_layer + embeddings + s.hidden


def kv_bytes_per_token(s: Shapes, kv_dtype_bytes: int) -> int:
    if s.mla_width:
        return s.full_attention_layers * s.mla_width * kv_dtype_bytes
    return 2 * s.full_attention_layers * s.kv_heads * s.head_dim * kv_dtype_bytes


@dataclass(frozen=True, kw_only=True)
class Vision:
    pixels_per_token: int
    max_pixels: int
    source: str

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
        else ("the processor default (16384 vision tokens)")
    )
    if not max_pixels:
        max_pixels = 16384 * per_token
    return Vision(pixels_per_token=per_token, max_pixels=max_pixels, source=source)


def json_object(path: Path) -> dict[str, Any]:
    """A model file that must hold a JSON object, read within the same limits as config.json."""
    from envkit.models.check_model import load_json, read_model_text

    data = load_json(read_model_text(path), str(path))
    if not isinstance(data, dict):
        raise BadInput(f"{path} holds a JSON {type(data).__name__}, not an object.")
    return data
