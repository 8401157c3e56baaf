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

Vision models profile with the largest image the processor is given (``max_pixels`` over the
pixels one vision token covers, ``(patch_size x merge_size)^2``), as many as the encoder
budget holds, before the KV cache is sized: that memory (``mmbudget``) comes out of the budget
too, at the pixels asked and at the recommended ones. Without ``--free`` the whole card is
taken as free, and the plan says so. When the context asked does not fit, a card that holds
at least ``ROOMY_CONTEXT`` tokens at the utilisation asked is offered a shorter context there
first, a higher utilisation second (a display or another process may need the rest).

Without a safetensors index the weights are counted from config.json: the language model
(shapes.py) and its vision and audio towers (towers.py). Without ``--max-model-len`` the
context is vLLM's own default for the model (shapes.default_max_len). Every number is given
at the utilisation asked and at the recommended one, side by side.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envkit.errors import BadInput
from envkit.gpu.cards import BF16_MIN, GIB, MAX_SIZE
from envkit.io.files import present
from envkit.results import Result, Severity, ok
from envkit.serving.command import (
    KEY_VALUE_UNTIL,
    MmKwargs,
    MmLimits,
    Recommendation,
    safe_utilization,
    serve_command,
)
from envkit.serving.plan.mmbudget import Asked, Images, images, mm_problems
from envkit.serving.plan.shapes import (
    DTYPE_BYTES,
    MAX_COUNT,
    Shapes,
    default_max_len,
    json_object,
    kv_bytes_per_token,
    parameters_from_shapes,
    shapes,
    vision,
    whole,
)
from envkit.serving.plan.towers import towers
from envkit.serving.plan.verdict import plan_result

# A context this long at the utilisation asked is worth keeping it for: a roomy card is offered
# a shorter context before a utilisation that leaves no room for a display or another process.
ROOMY_CONTEXT = 4096


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
    load_problems: tuple[Result, ...] = ()  # why the profile cannot load the model
    mm_limits: MmLimits | None = None  # --limit-mm-per-prompt
    mm_kwargs: MmKwargs | None = None  # --mm-processor-kwargs
    vllm: str = ""  # the profile's vLLM (which forms of the flags it takes)


@dataclass(frozen=True, kw_only=True)
class Memory:
    """The budget in bytes, at the utilisation asked."""

    total: int
    free: int
    requested: int
    weights: int
    reserve: int
    mm_profile: int  # the images vLLM profiles with (0: none), at the pixels asked
    kv_cache: int
    kv_per_token: int
    recommended_requested: int  # at the recommended utilisation
    recommended_mm_profile: int  # at the recommended max_pixels
    recommended_kv_cache: int

    def to_dict(self) -> dict[str, int]:
        return _fields(self)


@dataclass(frozen=True, kw_only=True)
class Numbers:
    """How the plan was reached."""

    dtype: str
    kv_cache_dtype: str
    weights_source: str
    max_model_len: int  # asked, else vLLM's default for the model (max_model_len_source)
    max_model_len_source: str  # "asked (--max-model-len)", or how vLLM derives its default
    max_model_len_that_fits: int  # tokens the KV cache holds at the recommended utilisation
    concurrency: float  # full-length requests at once, at the recommended utilisation
    max_model_len_that_fits_asked: int  # the same two at the utilisation asked
    concurrency_asked: float
    full_attention_layers: int
    layers: int
    highest_safe_utilization: float
    free_assumed: bool  # no --free (nor nvidia-smi): the whole card was taken as free

    def to_dict(self) -> dict[str, Any]:
        return _fields(self)


def _fields(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__dataclass_fields__}


@dataclass(frozen=True, kw_only=True)
class Plan:
    ok: bool
    problems: tuple[Result, ...]
    memory: Memory
    numbers: Numbers
    recommended: Recommendation
    mm: Images | None
    command: str
    notes: tuple[str, ...] = field(default_factory=tuple)
    result: Result  # the verdict (verdict.plan_result): its message is the text's verdict line

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "problems": [{**p.to_dict(), "where": p.subject} for p in self.problems],
            "memory": self.memory.to_dict(),
            **self.numbers.to_dict(),
            "recommended": self.recommended.to_dict(),
            "mm": self.mm.to_dict() if self.mm else None,
            "command": self.command,
            "notes": list(self.notes),
            "result": self.result.to_dict(),
        }


def _serve_dtype(
    asked: str, config_dtype: str, capability: tuple[int, int] | None
) -> tuple[str, list[Result]]:
    """The dtype vLLM serves in, and a problem when the card cannot run the one asked."""
    old_card = capability is not None and capability < BF16_MIN
    if asked != "auto":
        if asked not in DTYPE_BYTES:
            raise BadInput(f"--dtype {asked!r} is not one of auto, float16, bfloat16, float32.")
        if old_card and asked == "bfloat16" and capability is not None:
            return "half", [
                Result(severity=Severity.ERROR, code="bfloat16-unsupported", fix="--dtype half",
                       message=f"compute capability {capability[0]}.{capability[1]} has no "
                       "bfloat16: vLLM refuses --dtype bfloat16 below 8.0")
            ]  # fmt: skip
        return asked, []
    # vLLM's "auto": the checkpoint's dtype, except that float32 checkpoints are served in 16
    # bits; a card without bfloat16 gets half (field report 2: an RTX 2070, compute 7.5)
    served = "bfloat16" if config_dtype in ("float32", "float") else config_dtype
    return ("half" if old_card and served == "bfloat16" else served), []


def _weights(model: Path, config: dict[str, Any], s: Shapes, serve_bytes: int) -> tuple[int, str]:
    index = model / "model.safetensors.index.json"
    checkpoint_bytes = DTYPE_BYTES.get(s.dtype, 2)
    if present(index):
        metadata = json_object(index).get("metadata")
        if not isinstance(metadata, dict):
            raise BadInput(f"{index} has no metadata.total_size.")
        total = whole(metadata, "total_size", f"{index} metadata", maximum=MAX_SIZE)
        return total * serve_bytes // checkpoint_bytes, "model.safetensors.index.json"
    params = parameters_from_shapes(s)
    extra = towers(config, s.hidden)
    parts = [f"text {params / 1e9:.2f} B"]
    parts += [f"{name} tower {n / 1e9:.2f} B" for name, n in (("vision", extra.vision),
              ("audio", extra.audio)) if n]  # fmt: skip
    note = f"estimated from config.json shapes: {' + '.join(parts)} parameters"
    if isinstance(config.get("audio_config"), dict) and not extra.audio:
        note += " (the audio tower's layout is not one envkit counts)"
    return (params + extra.total) * serve_bytes, note


@dataclass(frozen=True, kw_only=True)
class _Budget:
    """The numbers the KV problems are judged from, at the utilisation asked."""

    kv_room: int  # KV cache at the asked utilisation (negative: none)
    per_token: int
    length: int
    length_source: str
    fits: int  # tokens that fit at the recommendation
    need: float  # the utilisation a full-length context needs
    safe: float
    requested: int
    weights: int
    serve_bytes: int
    mm: int  # the image profiling, as asked
    pixels: str  # the smaller max_pixels the recommendation profiles with ('' when none)
    shorter_first: bool  # a roomy card: a shorter context at the utilisation asked comes first


def _kv_problems(b: _Budget, inp: PlanInput) -> list[Result]:
    """What the KV cache lacks at the asked utilisation: no room at all, or too little for
    the context; each fix names the value: a utilisation that fits, else a context that
    fits, else how much GPU memory (or how small a model) it takes."""
    need_bytes = b.per_token * b.length
    whole_free = (b.weights + inp.reserve + b.mm + need_bytes) / 0.99  # one point of margin
    room = b.safe * inp.gpu_memory - inp.reserve - 16 * b.per_token
    largest = max(room, 0) / b.serve_bytes / 1e9
    bigger = (
        f"a GPU with {whole_free / GIB:.1f} GiB free (weights, reserve and a {b.length}-token "
        f"context), or a model under {largest:.1f} B parameters at {b.serve_bytes} bytes each"
    )
    at = f"at the asked utilisation {inp.utilization:.2f}"
    images = f" + image profiling {b.mm / GIB:.2f} GiB" if b.mm else ""
    shorter = f"--max-model-len {b.fits}" if b.fits else bigger
    raise_to = f"--gpu-memory-utilization {b.need:.2f}"
    if b.shorter_first:  # keep the utilisation: a display or another process needs room
        fix = f"{shorter} (at utilisation {min(inp.utilization, b.safe):.2f})"
        if b.need <= b.safe:
            fix += f", or {raise_to} for the whole context if that much is really free"
    else:
        fix = raise_to if b.need <= b.safe else shorter
    fix = f"{b.pixels} and {fix}" if b.pixels else fix
    out: list[Result] = []
    if b.kv_room <= 0:
        out.append(
            Result(
                severity=Severity.ERROR,
                code="no-room-for-kv-cache",
                message=(
                    f"weights {b.weights / GIB:.2f} GiB + reserve {inp.reserve / GIB:.2f} GiB"
                    f"{images} leave no KV cache in the {b.requested / GIB:.2f} GiB budget {at}"
                ),
                fix=fix if b.pixels or b.need > b.safe or b.shorter_first else raise_to,
            )
        )
    elif b.kv_room < need_bytes:
        context = (
            f"a {b.length}-token context"
            if b.length_source.startswith("asked")
            else f"vLLM's default context, {b.length} tokens "
            f"({b.length_source.split('default, ', 1)[-1]}),"
        )
        out.append(
            Result(
                severity=Severity.ERROR,
                code="max-model-len-too-long",
                message=(
                    f"{context} needs {need_bytes / GIB:.2f} GiB of KV cache; "
                    f"{b.kv_room / GIB:.2f} GiB are left {at}"
                ),
                fix=fix,
            )
        )
    return out


def make_plan(config: dict[str, Any], model: Path, model_arg: str, inp: PlanInput) -> Plan:
    """The memory plan. Problems are about the settings as asked; recommendations fix them."""
    s = shapes(config)
    if not 0 < inp.utilization <= 1:  # NaN too
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
    length, length_source = inp.max_model_len or 0, "asked (--max-model-len)"
    if not length:  # vLLM's own default, as it derives it from the config
        length, how = default_max_len(config)
        length_source = f"not asked: vLLM's default, {how}"
    if not 0 < length <= MAX_COUNT:
        raise BadInput(
            f"--max-model-len {str(length)[:20]} is out of range.",
            f"Give a context length from 1 to {MAX_COUNT:,} tokens.",
        )
    # what the profile cannot load comes first: no memory setting fixes it
    problems: list[Result] = [*inp.load_problems, *dtype_problems]
    requested = int(inp.utilization * inp.gpu_memory)
    safe = safe_utilization(free, inp.gpu_memory)
    if requested > free:
        problems.append(
            Result(
                severity=Severity.ERROR,
                code="exceeds-free-memory",
                message=(
                    f"{inp.utilization} x {inp.gpu_memory / GIB:.2f} GiB = "
                    f"{requested / GIB:.2f} GiB is more than the {free / GIB:.2f} GiB free: "
                    "vLLM refuses to start"
                ),
                fix=f"--gpu-memory-utilization {safe:.2f}",
            )
        )
    mm, mm_kwargs, mm_asked, mm_rec = images(
        vision(model, config), config, s.hidden, serve_bytes,
        Asked(inp.mm_limits, inp.mm_kwargs, inp.gpu_memory, length),
    )  # fmt: skip
    mm_bytes, mm_rec_bytes = (mm_asked.bytes, mm_rec.bytes) if mm_asked and mm_rec else (0, 0)
    fixed, fixed_rec = weights + inp.reserve + mm_bytes, weights + inp.reserve + mm_rec_bytes
    kv_room_asked = requested - fixed

    def held(room: int) -> int:  # tokens, in vLLM's KV cache blocks of 16
        return room // per_token // 16 * 16 if per_token and room > 0 else 0

    # the recommendation: the asked utilisation if it fits; else, on a roomy card, a shorter
    # context at it; else the least that holds a full-length context, else the most this GPU
    # can give (and the context that fits then)
    need = math.ceil((fixed_rec + per_token * length) / inp.gpu_memory * 100) / 100
    utilization = min(inp.utilization, safe)
    at_asked = held(int(utilization * inp.gpu_memory) - fixed_rec)
    shorter_first = ROOMY_CONTEXT <= at_asked < length
    if int(utilization * inp.gpu_memory) - fixed_rec < per_token * length and not shorter_first:
        utilization = need if need <= safe else safe
    kv_room = int(utilization * inp.gpu_memory) - fixed_rec
    fits, fits_asked = held(kv_room), held(kv_room_asked)
    budget = _Budget(
        kv_room=kv_room_asked, per_token=per_token, length=length, length_source=length_source,
        fits=fits, need=need, safe=safe, requested=requested, weights=weights,
        serve_bytes=serve_bytes, mm=mm_bytes, shorter_first=shorter_first,
        pixels=_pixels_fix(mm, mm_rec_bytes) if mm and mm_rec_bytes < mm_bytes else "",
    )  # fmt: skip
    problems += _kv_problems(budget, inp)
    problems += mm_problems(mm, length) if mm else []
    rec_len = min(length, fits) if fits else 0
    recommended = Recommendation(
        gpu_memory_utilization=utilization,
        max_model_len=rec_len,
        dtype=dtype,
        mm_processor_kwargs=mm_kwargs,
        limit_mm_per_prompt=inp.mm_limits.to_dict() if inp.mm_limits else None,
    )
    memory = Memory(
        total=inp.gpu_memory,
        free=free,
        requested=requested,
        weights=weights,
        reserve=inp.reserve,
        mm_profile=mm_bytes,
        kv_cache=max(kv_room_asked, 0),
        kv_per_token=per_token,
        recommended_requested=int(utilization * inp.gpu_memory),
        recommended_mm_profile=mm_rec_bytes,
        recommended_kv_cache=max(kv_room, 0),
    )
    numbers = Numbers(
        dtype=dtype,
        kv_cache_dtype=inp.kv_cache_dtype,
        weights_source=weights_source,
        max_model_len=length,
        max_model_len_source=length_source,
        max_model_len_that_fits=fits,
        concurrency=round(kv_room / (per_token * rec_len), 2) if rec_len else 0,
        max_model_len_that_fits_asked=fits_asked,
        concurrency_asked=round(kv_room_asked / (per_token * length), 2)
        if per_token and kv_room_asked > 0
        else 0,
        full_attention_layers=s.full_attention_layers,
        layers=s.layers,
        highest_safe_utilization=safe,
        free_assumed=inp.free is None,
    )
    notes = _notes(inp, utilization)
    if s.full_attention_layers != s.layers:
        notes.append(
            f"hybrid model: {s.full_attention_layers} of {s.layers} layers hold a KV "
            "cache; linear-attention layers keep a fixed-size state"
        )
    loadable = ok(inp.load_problems)
    command = (
        serve_command(model_arg, recommended, inp.kv_cache_dtype) if rec_len and loadable else ""
    )
    if not loadable:
        notes.append("the profile cannot load this model: no command to recommend")
    elif not rec_len:
        notes.append("no setting fits this model on this GPU: no command to recommend")
    verdict = plan_result(problems, inp.load_problems, model_arg, utilization=inp.utilization,
                          length=length, held=fits_asked, recommended=recommended,
                          command=command)  # fmt: skip
    return Plan(
        ok=ok(problems),  # warnings say, not refuse
        problems=tuple(problems),
        memory=memory,
        numbers=numbers,
        recommended=recommended,
        mm=mm,
        command=command,
        notes=tuple(notes),
        result=verdict,
    )


def _pixels_fix(mm: Images, rec_bytes: int) -> str:
    pixels = json.dumps({"max_pixels": mm.recommended_max_pixels})
    return f"--mm-processor-kwargs '{pixels}' (image profiling {rec_bytes / GIB:.2f} GiB)"


def _notes(inp: PlanInput, utilization: float) -> list[str]:
    """What the plan assumed that the user may know better (field report 2), and the forms
    of the flags the profile's vLLM takes."""
    notes = []
    if inp.free is None:
        left = (1 - utilization) * inp.gpu_memory / GIB
        above = (
            f"; the recommended {utilization:.2f} leaves {left:.2f} GiB for all else on the card"
            if utilization > 0.9
            else ""
        )
        notes.append(
            f"assumed the whole card free ({inp.gpu_memory / GIB:.2f} GiB): a card that drives "
            "a display, or that another process uses, has less (report 2: 6.98 of 8 GiB)"
            f"{above}; give the real figure with --free SIZE (nvidia-smi "
            "--query-gpu=memory.free --format=csv)"
        )
    version = tuple(int(p) for p in inp.vllm.split(".")[:2] if p.isdigit())
    if inp.mm_limits and inp.mm_limits.key_value and version and version >= KEY_VALUE_UNTIL:
        notes.append(
            f"vLLM {inp.vllm} takes --limit-mm-per-prompt only as JSON "
            f"({inp.mm_limits.flag()}), as the command gives it"
        )
    return notes
