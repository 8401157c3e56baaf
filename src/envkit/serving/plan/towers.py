"""The parameters of a multimodal model's vision and audio towers, counted from config.json
(``vision_config``, ``audio_config``), so a model without a safetensors index is weighed
whole: a Qwen2-VL-2B's tower is 0.67 B of its 2.21 B parameters.

The layouts are those of transformers' own modules (``modeling_qwen2_vl.py``,
``modeling_qwen2_5_vl.py``, ``modeling_siglip.py`` + ``Gemma3MultiModalProjector``,
``modeling_qwen2_audio.py``), read from the released wheels:

- a vision transformer of ``depth`` (or ``num_hidden_layers``) blocks, ``embed_dim`` (Qwen2-VL)
  or ``hidden_size`` wide: two norms, attention (fused q/k/v and an output projection, with
  biases), an MLP of ``intermediate_size`` (else ``mlp_ratio`` x width), gated (gate, up,
  down: Qwen2.5-VL's SiLU MLP) when ``hidden_act`` is ``silu``, else two layers;
- a patch embedding (``in_chans`` x ``temporal_patch_size`` x ``patch_size``^2 x width) and
  position embeddings (``num_position_embeddings``, or ``(image_size / patch_size)^2``);
- the connector to the language model: Qwen's merger of ``spatial_merge_size``^2 patches (a
  norm, two linear layers to ``out_hidden_size``, Qwen2-VL's ``hidden_size``, else the text
  width; once more per ``deepstack_visual_indexes``), else a projection of the tower's width
  to the text width (Gemma 3; LLaVA's two-layer projector when ``projector_hidden_act``);
- an audio encoder in Whisper's layout (``d_model``, ``encoder_layers``, ``encoder_ffn_dim``,
  ``num_mel_bins``, ``max_source_positions``: two convolutions, position embeddings, blocks
  of attention and a two-layer MLP) and its projection to the text width.

Every number is checked where it enters (``shapes.whole``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from envkit.serving.plan.shapes import whole


@dataclass(frozen=True)
class Towers:
    """Parameters outside the language model, by tower (0 when the config has none)."""

    vision: int = 0
    audio: int = 0

    @property
    def total(self) -> int:
        return self.vision + self.audio


def towers(config: dict[str, Any], text_hidden: int) -> Towers:
    """The towers ``config`` describes; ``text_hidden`` is the language model's width (the
    connectors project into it). Raises BadInput for a tower field out of range."""
    vc, ac = config.get("vision_config"), config.get("audio_config")
    return Towers(
        vision=vision_parameters(vc, config, text_hidden) if isinstance(vc, dict) else 0,
        audio=audio_parameters(ac, text_hidden) if isinstance(ac, dict) else 0,
    )


def vision_parameters(vc: dict[str, Any], config: dict[str, Any], text_hidden: int) -> int:
    where = "config.json vision_config"

    def num(key: str, default: int | None = None, names: tuple[str, ...] = ()) -> int:
        return whole(vc, key, where, default=default, names=names, minimum=0)

    width = num("embed_dim", 0) or num("hidden_size")
    depth = num("depth", names=("num_hidden_layers", "num_layers"))
    inner = num("intermediate_size", 0) or num("mlp_ratio", 4) * width
    gated = vc.get("hidden_act") in ("silu", "swiglu")
    mlp = 3 * width * inner + 2 * inner + width if gated else 2 * width * inner + inner + width
    block = 2 * 2 * width + 3 * width * width + 3 * width + width * width + width + mlp
    patch = num("patch_size", 14)
    channels = num("in_chans", 3, names=("in_channels", "num_channels"))
    embed = channels * num("temporal_patch_size", 1) * patch * patch * width + width
    image = num("image_size", 0)
    positions = num("num_position_embeddings", 0) or ((image // patch) ** 2 if patch else 0)
    merge = num("spatial_merge_size", 0)
    if merge:  # Qwen's merger: merge^2 neighbouring patches into one token of the text width
        out = num("out_hidden_size", 0) or (num("hidden_size") if "embed_dim" in vc else 0)
        out = out or text_hidden
        merged = merge * merge * width
        merger = 2 * width + merged * merged + merged + merged * out + out
        mergers = 1 + len(vc.get("deepstack_visual_indexes") or ())
        connector = merger * mergers
    elif "projector_hidden_act" in config:  # LLaVA: two layers with biases
        connector = width * text_hidden + text_hidden + text_hidden * text_hidden + text_hidden
    else:  # Gemma 3: one projection matrix and a norm of the tower's width
        connector = width * text_hidden + width
    post_norm = 0 if merge else 2 * width  # SigLIP's post_layernorm (Qwen's sits in the merger)
    return depth * block + embed + positions * width + post_norm + connector


def audio_parameters(ac: dict[str, Any], text_hidden: int) -> int:
    """Whisper's encoder layout (Qwen2-Audio's tower) and its projection; 0 for an
    ``audio_config`` of another layout (not counted: the plan's note says so)."""
    where = "config.json audio_config"
    if not all(k in ac for k in ("d_model", "encoder_layers")):
        return 0

    def num(key: str, default: int | None = None) -> int:
        return whole(ac, key, where, default=default, minimum=0)

    d, layers = num("d_model"), num("encoder_layers")
    ffn, mels = num("encoder_ffn_dim", 4 * d), num("num_mel_bins", 128)
    convs = mels * d * 3 + d + 3 * d * d + d
    positions = num("max_source_positions", 1500) * d
    block = 4 * d * d + 3 * d + 2 * 2 * d + 2 * d * ffn + ffn + d
    return convs + positions + layers * block + 2 * d + d * text_hidden + text_hidden
