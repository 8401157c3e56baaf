"""The images vLLM profiles with before it sizes the KV cache, for ``envkit plan``: how many,
how large, and their memory, as asked (``--limit-mm-per-prompt``, ``--mm-processor-kwargs``'
``max_pixels``) and as recommended (report 3: 512 vision tokens' worth of pixels when the
model's default is larger).

vLLM's profiling run (``profile_run`` in its GPU model runner, 0.8.5 to 0.17.1) builds dummy
images of the largest size the processor is given, batches as many as the encoder budget
holds, runs the vision tower on them and keeps their embeddings in the encoder cache while the
language model's dummy run follows; the KV cache gets what is left after that peak. This is
the step report 3 saw hang ("profiled with 1 image items of the maximum feature size").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from envkit.results import Result, Severity
from envkit.serving.command import MmKwargs, MmLimits
from envkit.serving.plan.shapes import Vision, whole

IMAGE_TOKEN_TARGET = 512  # the profiling image a small GPU can afford (field report 3)


@dataclass(frozen=True)
class Asked:
    """What the user asked that the image budget depends on."""

    mm_limits: MmLimits | None
    mm_kwargs: MmKwargs | None
    gpu_memory: int
    length: int  # the context planned for


@dataclass(frozen=True, kw_only=True)
class Images:
    """The image budget vLLM profiles with, as asked and as recommended."""

    max_image_tokens: int  # at the model's own max_pixels
    max_pixels: int
    pixels_per_token: int
    source: str
    recommended_max_pixels: int
    asked_max_pixels: int  # --mm-processor-kwargs' max_pixels, else the model's
    items_per_prompt: int | None  # --limit-mm-per-prompt's image count (None: vLLM's 999)
    encoder_budget: int  # tokens
    profiled_items_asked: int
    profiled_items: int  # at the recommendation

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


# vLLM's serve defaults for the scheduler (EngineArgs._set_default_args, 0.8.5 to 0.17.1): a
# GPU of 70 GiB or more batches 8192 tokens and 1024 requests, a smaller one 2048 and 256.
LARGE_GPU = 70 * 1024**3


@dataclass(frozen=True)
class EncoderProfile:
    """What vLLM's profiling run puts through the vision tower before it sizes the KV cache
    (``profile_run`` in vLLM's GPU model runner): ``items`` dummy images of the largest size
    the processor is given (``max_pixels``), batched, their embeddings kept in the encoder
    cache while the language model's dummy run follows."""

    tokens_per_item: int
    budget: int  # the encoder cache's budget in tokens
    items: int  # images profiled at once (0: images turned off)
    per_prompt: int | None  # --limit-mm-per-prompt's image count (None: vLLM's default)
    bytes: int  # estimate: the embeddings kept + the tower's activation peak

    @property
    def said(self) -> str:
        if not self.items:
            return "images turned off (--limit-mm-per-prompt image 0): no encoder profiling"
        return (
            f"{self.items} x {self.tokens_per_item} tokens: the encoder budget of {self.budget} "
            f"tokens over the tokens per image"
        )


def encoder_profile(
    vc: dict[str, Any],
    text_hidden: int,
    serve_bytes: int,
    *,
    tokens_per_item: int,
    patches_per_token: int,
    per_prompt: int | None,
    max_model_len: int,
    gpu_memory: int,
) -> EncoderProfile:
    """The images vLLM profiles with and their memory, as vLLM counts the items
    (``compute_mm_encoder_budget`` and ``MultiModalBudget._get_max_items``): the budget is the
    larger of the batched tokens and one image's tokens; the items are the budget over one
    image's tokens, at most the requests x the images per prompt (each prompt's images cut to
    what its context holds), at least 1. The memory per image is an estimate: its embeddings
    at the text width, plus the tower's widest step over its patches (the residual and either
    q/k/v or the MLP's hidden layer), in the serving dtype."""
    large = gpu_memory >= LARGE_GPU
    batched, requests = (8192, 1024) if large else (2048, 256)
    budget = max(batched, tokens_per_item)
    if per_prompt == 0 or tokens_per_item <= 0:
        return EncoderProfile(tokens_per_item, budget, 0, per_prompt, 0)
    limit = 999 if per_prompt is None else per_prompt
    prompt_items = max(1, min(limit, max_model_len // tokens_per_item))
    items = max(1, min(budget // tokens_per_item, requests * prompt_items))
    where = "config.json vision_config"
    width = whole(vc, "embed_dim", where, default=0, minimum=0) or whole(
        vc, "hidden_size", where, default=1024, minimum=0
    )
    inner = whole(vc, "intermediate_size", where, default=0, minimum=0) or (
        whole(vc, "mlp_ratio", where, default=4, minimum=0) * width
    )
    per_patch = (2 * width + max(3 * width, inner)) * serve_bytes
    per_item = tokens_per_item * (text_hidden * serve_bytes + patches_per_token * per_patch)
    return EncoderProfile(tokens_per_item, budget, items, per_prompt, items * per_item)


def images(
    image: Vision | None, config: dict[str, Any], text_hidden: int, serve_bytes: int, inp: Asked
) -> tuple[Images | None, dict[str, Any] | None, EncoderProfile | None, EncoderProfile | None]:
    """The image budget vLLM profiles with as asked (``--mm-processor-kwargs``' max_pixels,
    ``--limit-mm-per-prompt``'s images) and as recommended: the pixels asked, else report 3's
    512 vision tokens' worth when the model's default is larger; the processor kwargs to
    serve with; the profiling run's images and memory, as asked and recommended."""
    asked_kwargs = inp.mm_kwargs.to_dict() if inp.mm_kwargs else None
    if image is None:
        return None, asked_kwargs, None, None
    target = IMAGE_TOKEN_TARGET * image.pixels_per_token
    asked = inp.mm_kwargs.max_pixels if inp.mm_kwargs else None
    per_prompt = inp.mm_limits.get("image") if inp.mm_limits else None
    pixels = asked or image.max_pixels
    if asked is None and image.max_image_tokens > IMAGE_TOKEN_TARGET and per_prompt != 0:
        kwargs: dict[str, Any] | None = {**(asked_kwargs or {}), "max_pixels": target}
        recommended = target
    else:
        kwargs, recommended = asked_kwargs, pixels
    vc = config.get("vision_config")
    merge = image.pixels_per_token // max(1, image.patch * image.patch)

    def profile(max_pixels: int) -> EncoderProfile:
        return encoder_profile(
            vc if isinstance(vc, dict) else {}, text_hidden, serve_bytes,
            tokens_per_item=max_pixels // image.pixels_per_token, patches_per_token=merge,
            per_prompt=per_prompt, max_model_len=inp.length, gpu_memory=inp.gpu_memory,
        )  # fmt: skip

    as_asked, as_recommended = profile(pixels), profile(recommended)
    return (
        Images(
            max_image_tokens=image.max_image_tokens,
            max_pixels=image.max_pixels,
            pixels_per_token=image.pixels_per_token,
            source=image.source,
            recommended_max_pixels=recommended,
            asked_max_pixels=pixels,
            items_per_prompt=per_prompt,
            encoder_budget=as_asked.budget,
            profiled_items_asked=as_asked.items,
            profiled_items=as_recommended.items,
        ),
        kwargs,
        as_asked,
        as_recommended,
    )


def mm_problems(mm: Images, length: int) -> list[Result]:
    """A prompt with every image it may hold must fit the context."""
    if not mm.items_per_prompt:
        return []
    tokens = mm.items_per_prompt * (mm.asked_max_pixels // mm.pixels_per_token)
    if tokens <= length:
        return []
    return [
        Result(
            code="images-exceed-context",
            severity=Severity.WARNING,
            message=f"{mm.items_per_prompt} images per prompt at {mm.asked_max_pixels} pixels "
            f"are {tokens} tokens, more than the {length}-token context: vLLM refuses such "
            "a prompt",
            fix=f'--limit-mm-per-prompt \'{{"image": '
            f"{max(1, length // max(1, tokens // mm.items_per_prompt))}}}' or a smaller "
            "max_pixels",
        )
    ]
