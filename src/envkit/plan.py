"""``envkit plan``: will this model fit this GPU, the way vLLM budgets memory?

vLLM's budget (``Worker.init_device`` and ``determine_available_memory`` in vLLM's GPU
worker) in four lines:

1. vLLM asks for ``U x total`` bytes (``--gpu-memory-utilization``, default 0.9) and refuses to
   start when the GPU has less free memory than that.
2. Out of that budget come the weights, the activation peak of a profiling run and CUDA
   graphs (here one stated reserve, ``--reserve``, default 1 GiB), and the KV cache gets the
   rest.
3. Each token of context holds, per full-attention layer, a key and a value vector per KV
   head: ``2 x kv_heads x head_dim x bytes``. Linear-attention layers of hybrid models
   (``layer_types``) keep a fixed-size state instead; MLA models (``kv_lora_rank``) keep one
   latent vector of ``kv_lora_rank + qk_rope_head_dim``.
4. A request of ``max_model_len`` tokens must fit in the KV cache; concurrency is the number
   of such requests that fit at once.

Vision models profile with the largest image the processor accepts: ``max_pixels`` over the
pixels one vision token covers (``(patch_size x merge_size)^2``).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import BadInput
from .findings import Finding

GIB = 1024**3
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
_UNITS = {
    "b": 1,
    "k": 1000,
    "m": 1000**2,
    "g": 1000**3,
    "t": 1000**4,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
IMAGE_TOKEN_TARGET = 512  # the profiling image a small GPU can afford (field report 3)


MAX_SIZE = 2**50  # 1 PiB: no GPU (or reserve) is larger
MAX_COUNT = 2**31  # the largest layer count, width or vocabulary a config.json may state


def parse_size(text: str, what: str = "size", *, allow_zero: bool = False) -> int:
    """``8GiB``, ``6.98GiB``, ``24GB``, ``512MiB``: a number and a unit (a bare number is
    refused: ``--gpu-memory 8`` would silently mean 8 bytes)."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kmgt](?:ib|b)?|b)?\s*", text.lower())
    if not match or not match.group(2):
        raise BadInput(
            f"{what} {text!r} is not a size with a unit.",
            "Write it like 8GiB, 7.5G, 6.98GiB, 24GB or 512MiB (GiB = 1024^3 bytes, GB = 1000^3).",
        )
    value = int(float(match.group(1)) * _UNITS[match.group(2)])
    if value > MAX_SIZE or (value <= 0 and not allow_zero):
        raise BadInput(
            f"{what} {text!r} is out of range.",
            "Give the size of a real GPU (above 0, below 1 PiB), e.g. 8GiB.",
        )
    return value


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    inner = config.get("text_config") or config.get("llm_config")
    return {**config, **inner} if isinstance(inner, dict) else config


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


def whole(
    table: dict[str, Any],
    key: str,
    source: str,
    *,
    default: int | None = None,
    minimum: int = 1,
    maximum: int = MAX_COUNT,
    names: tuple[str, ...] = (),
) -> int:
    """A whole number from a model file, checked where it enters: BadInput naming the file,
    field and value when it is missing, not a whole number, or out of range."""
    found = next(((k, table[k]) for k in (key, *names) if table.get(k) is not None), None)
    if found is None:
        if default is not None:
            return default
        raise BadInput(f"{source} has no usable {key!r} for the memory plan.")
    field, value = found
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise BadInput(
            f"{source}: {field} is {json.dumps(value)[:60]}, not a whole number.",
            "Fix the file, or use the checkpoint's own one.",
        )
    if not minimum <= value <= maximum:
        raise BadInput(
            f"{source}: {field} is {value}; it must be a whole number from {minimum} "
            f"to {maximum:,}.",
            "Fix the file, or use the checkpoint's own one.",
        )
    return value


def shapes(config: dict[str, Any], source: str = "config.json") -> Shapes:
    text = _text_config(config)

    def num(key: str, default: int | None = None, minimum: int = 1) -> int:
        # GPT-2/Falcon/T5-style configs name the same shapes differently
        return whole(
            text, key, source, default=default, minimum=minimum, names=_ALIASES.get(key, ())
        )

    layers = num("num_hidden_layers")
    heads = num("num_attention_heads")
    hidden = num("hidden_size")
    kinds = text.get("layer_types")
    full = (
        sum(1 for k in kinds if "full" in str(k) or k == "attention")
        if isinstance(kinds, list) and kinds
        else layers
    )
    dtype = text.get("dtype") or text.get("torch_dtype") or config.get("torch_dtype") or "bfloat16"
    if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
        raise BadInput(
            f"{source}: torch_dtype {json.dumps(dtype)[:40]} is not a dtype vLLM serves "
            "(float16, bfloat16, float32).",
            "Fix the file, or pass --dtype float16 or bfloat16.",
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
        tied=bool(text.get("tie_word_embeddings", config.get("tie_word_embeddings", True))),
        mla_width=mla,
        experts=whole(
            text,
            "num_experts",
            source,
            default=0,
            minimum=0,
            names=("n_routed_experts", "num_local_experts"),
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
    vc = config.get("vision_config")
    pre: dict[str, Any] = {}
    pre_path = model / "preprocessor_config.json"
    if pre_path.is_file():
        pre = _json_object(pre_path)
    if not isinstance(vc, dict) and not pre:
        return None
    vc = vc if isinstance(vc, dict) else {}
    where, cfg = str(pre_path), "config.json vision_config"
    patch = whole(pre, "patch_size", where, default=0) or whole(vc, "patch_size", cfg, default=14)
    merge = whole(pre, "merge_size", where, default=0) or whole(
        vc, "spatial_merge_size", cfg, default=2
    )
    per_token = (patch * merge) ** 2
    size: dict[str, Any] = pre["size"] if isinstance(pre.get("size"), dict) else {}
    max_pixels = whole(pre, "max_pixels", where, default=0) or whole(
        size, "longest_edge", f"{where} size", default=0, names=("max_pixels",)
    )
    source = (
        "preprocessor_config.json max_pixels"
        if max_pixels
        else ("the processor default (16384 vision tokens)")
    )
    if not max_pixels:
        max_pixels = 16384 * per_token
    return Vision(pixels_per_token=per_token, max_pixels=max_pixels, source=source)


def _json_object(path: Path) -> dict[str, Any]:
    """A model file that must hold a JSON object, read within the same limits as config.json."""
    from .modelcheck import MAX_CONFIG_BYTES, load_json

    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise BadInput(f"{path} is larger than a model's metadata file can be.")
        data = load_json(path.read_bytes(), str(path))
    except OSError as exc:
        raise BadInput(f"Cannot read {str(path)!r} ({exc.strerror}).") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path} holds a JSON {type(data).__name__}, not an object.")
    return data


@dataclass(frozen=True, kw_only=True)
class PlanInput:
    model: Path
    gpu_memory: int
    free: int | None = None
    utilization: float = 0.9
    max_model_len: int | None = None
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    reserve: int = GIB
    compute_capability: tuple[int, int] | None = None  # None: not said (bfloat16 assumed)
    load_problems: tuple[Finding, ...] = ()  # why the profile cannot load the model


# Common cards: memory and compute capability (facts from the vendor's tables). Names are
# matched lower-case with spaces and underscores as '-', "nvidia-" and "geforce-" dropped.
GPUS: dict[str, tuple[int, tuple[int, int]]] = {
    "rtx-2070": (8 * GIB, (7, 5)),
    "rtx-2080": (8 * GIB, (7, 5)),
    "rtx-2080-ti": (11 * GIB, (7, 5)),
    "t4": (16 * GIB, (7, 5)),
    "v100-16gb": (16 * GIB, (7, 0)),
    "v100-32gb": (32 * GIB, (7, 0)),
    "rtx-3060": (12 * GIB, (8, 6)),
    "rtx-3080": (10 * GIB, (8, 6)),
    "rtx-3090": (24 * GIB, (8, 6)),
    "a10": (24 * GIB, (8, 6)),
    "a10g": (24 * GIB, (8, 6)),
    "a100-40gb": (40 * GIB, (8, 0)),
    "a100-80gb": (80 * GIB, (8, 0)),
    "rtx-4060-ti-16gb": (16 * GIB, (8, 9)),
    "rtx-4090": (24 * GIB, (8, 9)),
    "l4": (24 * GIB, (8, 9)),
    "l40s": (48 * GIB, (8, 9)),
    "h100-80gb": (80 * GIB, (9, 0)),
    "h200": (141 * GIB, (9, 0)),
}
BF16_MIN = (8, 0)  # vLLM refuses bfloat16 below compute capability 8.0


def gpu(name: str) -> tuple[int, tuple[int, int]]:
    """A card from :data:`GPUS` by name; BadInput naming the known ones otherwise."""
    key = name.strip().lower().replace(" ", "-").replace("_", "-")
    for prefix in ("nvidia-", "geforce-"):
        key = key.removeprefix(prefix)
    if key in GPUS:
        return GPUS[key]
    import difflib

    close = difflib.get_close_matches(key, list(GPUS), n=1)
    hint = f"Did you mean {close[0]}? " if close else ""
    raise BadInput(
        f"--gpu {name!r} is not a card envkit knows.",
        f"{hint}Known: {', '.join(GPUS)}; or give --gpu-memory and --compute-capability.",
    )


def compute_capability(text: str) -> tuple[int, int]:
    """``7.5`` -> (7, 5); BadInput for anything else."""
    match = re.fullmatch(r"\s*([0-9]{1,2})\.([0-9])\s*", text)
    if not match:
        raise BadInput(
            f"--compute-capability {text!r} is not a compute capability such as 7.5 or 8.9.",
            "nvidia-smi --query-gpu=compute_cap --format=csv prints it.",
        )
    return int(match.group(1)), int(match.group(2))


@dataclass(frozen=True, kw_only=True)
class Memory:
    """The budget in bytes, at the utilisation asked."""

    total: int
    free: int
    requested: int
    weights: int
    reserve: int
    kv_cache: int
    kv_per_token: int
    recommended_requested: int  # at the recommended utilisation
    recommended_kv_cache: int

    def to_dict(self) -> dict[str, int]:
        return _fields(self)


@dataclass(frozen=True, kw_only=True)
class Numbers:
    """How the plan was reached."""

    dtype: str
    kv_cache_dtype: str
    weights_source: str
    max_model_len: int  # asked (or the model's maximum)
    max_model_len_that_fits: int  # at the recommended utilisation
    concurrency: float
    full_attention_layers: int
    layers: int
    highest_safe_utilization: float

    def to_dict(self) -> dict[str, Any]:
        return _fields(self)


@dataclass(frozen=True, kw_only=True)
class Recommendation:
    """The settings to serve with: ``vllm serve`` flags."""

    gpu_memory_utilization: float
    max_model_len: int
    dtype: str
    mm_processor_kwargs: dict[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = _fields(self)
        if self.mm_processor_kwargs is None:
            del data["mm_processor_kwargs"]
        return data


@dataclass(frozen=True, kw_only=True)
class Images:
    """The image budget vLLM profiles with."""

    max_image_tokens: int
    max_pixels: int
    pixels_per_token: int
    source: str
    recommended_max_pixels: int

    def to_dict(self) -> dict[str, Any]:
        return _fields(self)


def _fields(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__dataclass_fields__}


@dataclass(frozen=True, kw_only=True)
class Plan:
    ok: bool
    problems: tuple[Finding, ...]
    memory: Memory
    numbers: Numbers
    recommended: Recommendation
    mm: Images | None
    command: str
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "problems": [p.to_dict() for p in self.problems],
            "memory": self.memory.to_dict(),
            **self.numbers.to_dict(),
            "recommended": self.recommended.to_dict(),
            "mm": self.mm.to_dict() if self.mm else None,
            "command": self.command,
            "notes": list(self.notes),
        }


def _serve_dtype(
    asked: str, config_dtype: str, capability: tuple[int, int] | None
) -> tuple[str, list[Finding]]:
    """The dtype vLLM serves in, and a problem when the card cannot run the one asked."""
    old_card = capability is not None and capability < BF16_MIN
    if asked != "auto":
        if asked not in DTYPE_BYTES:
            raise BadInput(f"--dtype {asked!r} is not one of auto, float16, bfloat16, float32.")
        if old_card and asked == "bfloat16" and capability is not None:
            return "half", [
                Finding(
                    code="bfloat16-unsupported",
                    message=f"compute capability {capability[0]}.{capability[1]} has no "
                    "bfloat16: vLLM refuses --dtype bfloat16 below 8.0",
                    fix="--dtype half",
                )
            ]
        return asked, []
    # vLLM's "auto": the checkpoint's dtype, except that float32 checkpoints are served in 16
    # bits; a card without bfloat16 gets half (field report 2: an RTX 2070, compute 7.5)
    served = "bfloat16" if config_dtype in ("float32", "float") else config_dtype
    return ("half" if old_card and served == "bfloat16" else served), []


def _weights(model: Path, config: dict[str, Any], s: Shapes, serve_bytes: int) -> tuple[int, str]:
    index = model / "model.safetensors.index.json"
    checkpoint_bytes = DTYPE_BYTES.get(s.dtype, 2)
    if index.is_file():
        metadata = _json_object(index).get("metadata")
        if not isinstance(metadata, dict):
            raise BadInput(f"{index} has no metadata.total_size.")
        total = whole(metadata, "total_size", f"{index} metadata", maximum=MAX_SIZE)
        return total * serve_bytes // checkpoint_bytes, "model.safetensors.index.json"
    params = parameters_from_shapes(s)
    note = "estimated from config.json shapes"
    if isinstance(config.get("vision_config"), dict):
        note += " (the vision tower is not counted)"
    return params * serve_bytes, note


def _kv_problems(
    kv_room_asked: int,
    need_bytes: int,
    length: int,
    fits: int,
    need: float,
    safe: float,
    requested: int,
    weights: int,
    inp: PlanInput,
) -> list[Finding]:
    """What the KV cache lacks at the asked utilisation: no room at all, or too little for
    the context; each with the fix (a utilisation that fits, else a shorter context)."""
    out: list[Finding] = []
    if kv_room_asked <= 0:
        out.append(
            Finding(
                code="no-room-for-kv-cache",
                message=(
                    f"weights {weights / GIB:.2f} GiB + reserve {inp.reserve / GIB:.2f} GiB "
                    f"leave no KV cache in a {requested / GIB:.2f} GiB budget"
                ),
                fix=f"--gpu-memory-utilization {need:.2f}"
                if need <= safe
                else "a smaller model, fewer bytes per weight (quantised), or a larger GPU",
            )
        )
    elif kv_room_asked < need_bytes:
        out.append(
            Finding(
                code="max-model-len-too-long",
                message=(
                    f"a {length}-token context needs {need_bytes / GIB:.2f} GiB of "
                    f"KV cache; {kv_room_asked / GIB:.2f} GiB are left"
                ),
                fix=f"--gpu-memory-utilization {need:.2f}"
                if need <= safe
                else (f"--max-model-len {fits}" if fits else "a smaller model or a larger GPU"),
            )
        )
    return out


def _images(image: Vision | None) -> tuple[Images | None, dict[str, int] | None]:
    """The image budget vLLM profiles with, and the processor kwargs a small GPU needs
    (report 3: 512 vision tokens' worth of pixels), when the default is larger."""
    if image is None:
        return None, None
    target = IMAGE_TOKEN_TARGET * image.pixels_per_token
    kwargs = {"max_pixels": target} if image.max_image_tokens > IMAGE_TOKEN_TARGET else None
    return Images(
        max_image_tokens=image.max_image_tokens,
        max_pixels=image.max_pixels,
        pixels_per_token=image.pixels_per_token,
        source=image.source,
        recommended_max_pixels=min(target, image.max_pixels),
    ), kwargs


def make_plan(config: dict[str, Any], model: Path, model_arg: str, inp: PlanInput) -> Plan:
    """The memory plan. Problems are about the settings as asked; recommendations fix them."""
    s = shapes(config)
    if not 0 < inp.utilization <= 1:
        raise BadInput(f"--gpu-memory-utilization {inp.utilization} must be in (0, 1].")
    free = inp.free if inp.free is not None else inp.gpu_memory
    if free > inp.gpu_memory:
        raise BadInput("--free is larger than --gpu-memory.")
    dtype, dtype_problems = _serve_dtype(inp.dtype, s.dtype, inp.compute_capability)
    serve_bytes = DTYPE_BYTES[dtype]
    kv_bytes = (
        DTYPE_BYTES.get(inp.kv_cache_dtype, serve_bytes)
        if inp.kv_cache_dtype != "auto"
        else serve_bytes
    )
    weights, weights_source = _weights(model, config, s, serve_bytes)
    per_token = kv_bytes_per_token(s, kv_bytes)
    text = _text_config(config)
    length = inp.max_model_len or whole(
        text, "max_position_embeddings", "config.json", default=4096
    )
    # what the profile cannot load comes first: no memory setting fixes it
    problems: list[Finding] = [*inp.load_problems, *dtype_problems]
    requested = int(inp.utilization * inp.gpu_memory)
    # one point below the free fraction: the CUDA context and other processes take a little
    # more once vLLM starts (field report 2: 6.98 of 8 GiB free, 0.86 works)
    safe = max(0.0, math.floor((free / inp.gpu_memory - 0.01) * 100) / 100)
    if requested > free:
        problems.append(
            Finding(
                code="exceeds-free-memory",
                message=(
                    f"{inp.utilization} x {inp.gpu_memory / GIB:.2f} GiB = "
                    f"{requested / GIB:.2f} GiB is more than the {free / GIB:.2f} GiB free: "
                    "vLLM refuses to start"
                ),
                fix=f"--gpu-memory-utilization {safe:.2f}",
            )
        )
    kv_room_asked = requested - weights - inp.reserve
    # the recommendation: the asked utilisation if it fits, else the least that holds a
    # full-length context, else the most this GPU can give (and the context that fits then)
    need = math.ceil((weights + inp.reserve + per_token * length) / inp.gpu_memory * 100) / 100
    utilization = min(inp.utilization, safe)
    if kv_room_asked < per_token * length:
        utilization = need if need <= safe else safe
    kv_room = int(utilization * inp.gpu_memory) - weights - inp.reserve
    fits = kv_room // per_token if per_token and kv_room > 0 else 0
    fits = fits // 16 * 16  # vLLM allocates the KV cache in blocks of 16 tokens
    problems += _kv_problems(
        kv_room_asked, per_token * length, length, fits, need, safe, requested, weights, inp
    )
    rec_len = min(length, fits) if fits else 0
    mm, mm_kwargs = _images(vision(model, config))
    recommended = Recommendation(
        gpu_memory_utilization=utilization,
        max_model_len=rec_len,
        dtype=dtype,
        mm_processor_kwargs=mm_kwargs,
    )
    memory = Memory(
        total=inp.gpu_memory,
        free=free,
        requested=requested,
        weights=weights,
        reserve=inp.reserve,
        kv_cache=max(kv_room_asked, 0),
        kv_per_token=per_token,
        recommended_requested=int(utilization * inp.gpu_memory),
        recommended_kv_cache=max(kv_room, 0),
    )
    numbers = Numbers(
        dtype=dtype,
        kv_cache_dtype=inp.kv_cache_dtype,
        weights_source=weights_source,
        max_model_len=length,
        max_model_len_that_fits=fits,
        concurrency=round(kv_room / (per_token * rec_len), 2) if rec_len else 0,
        full_attention_layers=s.full_attention_layers,
        layers=s.layers,
        highest_safe_utilization=safe,
    )
    notes = []
    if s.full_attention_layers != s.layers:
        notes.append(
            f"hybrid model: {s.full_attention_layers} of {s.layers} layers hold a KV "
            "cache; linear-attention layers keep a fixed-size state"
        )
    loadable = not inp.load_problems
    command = (
        serve_command(model_arg, recommended, inp.kv_cache_dtype) if rec_len and loadable else ""
    )
    if not loadable:
        notes.append("the profile cannot load this model: no command to recommend")
    elif not rec_len:
        notes.append("no setting fits this model on this GPU: no command to recommend")
    return Plan(
        ok=not problems,
        problems=tuple(problems),
        memory=memory,
        numbers=numbers,
        recommended=recommended,
        mm=mm,
        command=command,
        notes=tuple(notes),
    )


def serve_args(rec: Recommendation, kv_cache_dtype: str = "auto") -> list[str]:
    """The recommended settings as vllm serve flags."""
    args = [
        "--dtype",
        rec.dtype,
        "--gpu-memory-utilization",
        f"{rec.gpu_memory_utilization:.2f}",
        "--max-model-len",
        str(rec.max_model_len),
    ]
    if kv_cache_dtype != "auto":
        args += ["--kv-cache-dtype", kv_cache_dtype]
    if rec.mm_processor_kwargs is not None:
        args += ["--mm-processor-kwargs", json.dumps(rec.mm_processor_kwargs)]
    return args


def serve_command(model: str, rec: Recommendation, kv_cache_dtype: str = "auto") -> str:
    return " ".join(
        ["vllm", "serve", *(_quote(a) for a in [model, *serve_args(rec, kv_cache_dtype)])]
    )


def _quote(text: str) -> str:
    return text if re.fullmatch(r"[\w./:@+-]+", text) else "'" + text.replace("'", "'\\''") + "'"


def compose(model: str, rec: Recommendation, vllm_version: str, kv: str = "auto") -> str:
    """A docker-compose service running the recommended command (vLLM's OpenAI image)."""
    args = ["--model", model, *serve_args(rec, kv)]
    image = f"vllm/vllm-openai:v{vllm_version}" if vllm_version else "vllm/vllm-openai:latest"
    lines = [
        "services:",
        "  vllm:",
        f"    image: {image}",
        "    ports:",
        '      - "8000:8000"',
        "    ipc: host",
        "    environment:",
        "      - HF_TOKEN  # passed through, never written",
        "    command:",
        *(f"      - {json.dumps(a)}" for a in args),
        "    deploy:",
        "      resources:",
        "        reservations:",
        "          devices:",
        "            - driver: nvidia",
        "              count: 1",
        "              capabilities: [gpu]",
    ]
    return "\n".join(lines) + "\n"
