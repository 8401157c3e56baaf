"""Fixes for the GPU and its memory: the free-memory check, the KV cache, CUDA out of memory,
the encoder-cache profiling stall, pinned memory (UVA), bfloat16, shared memory, NCCL and
Fabric Manager. Each is built from the numbers in the log and envkit's knowledge, with the
arithmetic shown."""

from __future__ import annotations

import math
import re
from pathlib import Path

from envkit.serving.command import safe_utilization
from envkit.serving.explain.fixcontext import Builder, Context, Fix, first, gib
from envkit.serving.explain.knowledge import Patch
from envkit.serving.explain.signatures import Code
from envkit.serving.explain.watch import Hit

IMAGE_TOKEN_TARGET = 512  # the profiling image a small GPU can afford (field report 3)
# the first vLLM release that reads VLLM_WSL2_ENABLE_PIN_MEMORY (bisected in the wheels)
WSL2_PIN_SWITCH = "VLLM_WSL2_ENABLE_PIN_MEMORY"
WSL2_PIN_FIRST = "0.24.0"  # 0.23.0 does not
_SIZE = r"([\d.]+) ?([KMG]i?B)"
_UNITS = {"K": 1 / 1024**2, "M": 1 / 1024, "G": 1.0}


def _gib(number: str, unit: str) -> float:
    return float(number) * _UNITS[unit[0]]


def _plan(ctx: Context, extra: str = "", total: float | None = None) -> str:
    where = ctx.gpu_option(total)
    return f"envkit plan {ctx.profile_name()} {ctx.model} {where}{extra}"


def free_memory(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    free, total = float(first(hits, "free")), float(first(hits, "total"))
    asked = float(first(hits, "utilization") or 0.9)
    requested = float(first(hits, "requested") or asked * total)
    safe = safe_utilization(free, total)
    details = [
        f"asked: {asked} x {gib(total)} = {gib(requested)}, more than the {gib(free)} free",
        f"fits: {free:.2f} / {total:.2f} = {free / total:.4f}; one point less for the CUDA "
        f"context = {free / total - 0.01:.4f}; down to two decimals: {safe:.2f} "
        f"({gib(safe * total)})",
    ]
    if ctx.facts.weights_gib is not None:
        left = safe * total - ctx.facts.weights_gib
        details.append(
            f"at {safe:.2f}: {gib(safe * total)} - {gib(ctx.facts.weights_gib)} of weights "
            f"leaves {gib(left)} for the KV cache, activations and CUDA graphs"
        )
    return Fix(
        summary=f"only {gib(free)} of {gib(total)} free; vLLM asked for {gib(requested)}",
        meaning=(
            "vLLM takes --gpu-memory-utilization of the GPU's total memory and refuses to "
            "start when less than that is free; other processes (on WSL2 and Docker Desktop "
            "the desktop itself) hold the rest."
        ),
        steps=(
            f"--gpu-memory-utilization {safe:.2f}",
            "or free the memory other processes hold (nvidia-smi lists them)",
        ),
        details=(*details, *ctx.gpu_details(first(hits, "device"))),
        next=(_plan(ctx, f" --free {free}GiB --gpu-memory-utilization {safe:.2f}", total),),
    )


def kv_cache(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    needed, available = first(hits, "needed"), first(hits, "available")
    estimated = first(hits, "estimated")
    details: list[str] = []
    steps: list[str] = []
    if needed and available:
        summary = f"one request needs {needed} GiB of KV cache; {available} GiB are left"
        # the length vLLM computed with (its message says it), else the one asked for
        length = first(hits, "asked_len") or ctx.arg("max_model_len", "max_seq_len")
        details.append(
            f"KV cache per request of max_model_len{f' {length}' if length else ''}: "
            f"{needed} GiB > {available} GiB left after weights, activations and graphs"
        )
        if estimated:
            steps.append(f"--max-model-len {estimated} (the longest context that fits, vLLM says)")
    elif max_len := first(hits, "max_len"):
        tokens = first(hits, "kv_tokens")
        summary = f"max_model_len {max_len} is more than the {tokens} tokens the KV cache holds"
        steps.append(f"--max-model-len {int(tokens) // 16 * 16}")
    else:
        summary = "no memory is left for the KV cache"
        details.append("the weights and the profiling run's activations took the whole budget")
    steps += [
        "or raise --gpu-memory-utilization (up to what is free)",
        "or --kv-cache-dtype fp8 (half the bytes per token), or a smaller model",
    ]
    return Fix(
        summary=summary,
        meaning=(
            "vLLM gives the KV cache what is left of its budget after the weights, the "
            "profiling run's activations and CUDA graphs; a request of max_model_len tokens "
            "must fit in it."
        ),
        steps=tuple(steps),
        details=(*details, *ctx.gpu_details()),
        next=(_plan(ctx),),
    )


def _encoder_before(hits: tuple[Hit, ...], ctx: Context) -> Hit | None:
    encoder = ctx.scan.hits.get(Code.ENCODER_CACHE_PROFILING, ())
    return next((e for e in encoder if e.line.number < hits[0].line.number), None)


_CAPACITY = re.compile(
    r"total capacity of " + _SIZE + r" of which ([\d.]+) ?(bytes|[KMG]i?B) is free"
)


def _free_share(text: str) -> tuple[float, float] | None:
    """(total GiB, free GiB) of torch's out-of-memory message."""
    if m := _CAPACITY.search(text):
        free = 0.0 if m.group(4) == "bytes" else _gib(m.group(3), m.group(4))
        return _gib(m.group(1), m.group(2)), free
    return None


def occupied(hits: tuple[Hit, ...], ctx: Context) -> bool:
    """An out-of-memory with (almost) nothing free before any weight loaded: another
    process holds the GPU, no setting of this start is the cause."""
    share = _free_share(" ".join(h.line.text for h in hits))
    weights = ctx.facts.weights_line
    before = weights is None or (bool(hits) and weights > hits[0].line.number)
    return share is not None and share[1] <= 0.01 * share[0] and before


def gpu_occupied(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    total, free = _free_share(" ".join(h.line.text for h in hits)) or (0.0, 0.0)
    return Fix(
        summary=f"the GPU was full before vLLM loaded anything: {gib(free)} of {gib(total)} free",
        meaning=(
            "The allocation failed before any weight was loaded, with nothing free: another "
            "process (an earlier vLLM, a notebook, the desktop) holds the card. No context "
            "length or utilisation of this start changes that."
        ),
        steps=(
            "nvidia-smi (the processes holding the GPU); stop them, e.g. an earlier vLLM",
            "or start on another GPU (CUDA_VISIBLE_DEVICES=N)",
        ),
        details=(f"the GPU has {gib(total)} in all, {gib(free)} free",),
        next=(_plan(ctx, " --free FREE", total),),
    )


def cuda_oom(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    text = " ".join(h.line.text for h in hits)
    details: list[str] = []
    if m := re.search(r"Tried to allocate " + _SIZE, text):
        details.append(f"tried to allocate {m.group(1)} {m.group(2)}")
    if m := re.search(r"total capacity of " + _SIZE + r" of which " + _SIZE + " is free", text):
        details.append(
            f"the GPU has {m.group(1)} {m.group(2)} in all, {m.group(3)} {m.group(4)} free"
        )
    steps = [
        "a shorter --max-model-len or fewer --max-num-seqs (the profiling run's batch)",
        "--enforce-eager (no memory for CUDA graphs)",
        "--gpu-memory-utilization lower only when another process shares the GPU",
    ]
    encoder = _encoder_before(hits, ctx)
    if encoder is not None:
        pixels = _pixels(encoder, ctx)
        details += pixels[1]
        steps.insert(0, pixels[0])
    return Fix(
        summary="CUDA ran out of memory",
        meaning=(
            "An allocation did not fit in what was left on the GPU"
            + (
                ": it came while vLLM profiled the largest image the model accepts."
                if encoder
                else "."
            )
        ),
        steps=tuple(steps),
        details=(*details, *ctx.gpu_details()),
        next=(_plan(ctx, "", (_free_share(text) or (None, 0.0))[0]),),
    )


def _patch(ctx: Context) -> Patch | None:
    model = ctx.facts.model
    folder = Path(model) if model else None
    if folder is not None and (folder / "config.json").is_file():
        try:
            from envkit.io.files import MiB, read_small
            from envkit.models.check_model import load_json
            from envkit.serving.plan.shapes import vision

            config = load_json(read_small(folder / "config.json", 8 * MiB), str(folder))
            seen = vision(folder, config) if isinstance(config, dict) else None
            if seen:
                side = math.isqrt(seen.pixels_per_token)  # (patch x merge) already
                return Patch(side, 1, f"{folder}'s preprocessor or vision config")
        except Exception:  # an unreadable local model is no reason to stop explaining
            pass
    architecture = next(iter(ctx.facts.architectures), "")
    return ctx.knowledge.patch("", architecture, model)


def _pixels(hit: Hit, ctx: Context) -> tuple[str, list[str]]:
    budget = int(hit.groups.get("budget", "0"))
    patch = _patch(ctx)
    if patch is None:
        return (
            "--mm-processor-kwargs '{\"max_pixels\": N}' with N = 512 x (patch_size x "
            "spatial_merge_size)^2 from the model's config.json vision_config",
            [f"encoder budget: {budget} tokens; the model's pixels per token are not known"],
        )
    per = patch.pixels_per_token
    side = math.isqrt(per)
    target = IMAGE_TOKEN_TARGET * per
    details = [
        f"pixels per token: (patch {patch.patch} x merge {patch.merge})^2 = {side} x {side} = "
        f"{per}, from {patch.source}",
        f"profiling image now: {budget} tokens x {per} = {budget * per:,} pixels, about "
        f"{math.isqrt(budget * per)} x {math.isqrt(budget * per)}",
        f"max_pixels for {IMAGE_TOKEN_TARGET} tokens: {IMAGE_TOKEN_TARGET} x {side} x {side} = "
        f"{target}",
    ]
    return f"--mm-processor-kwargs '{{\"max_pixels\": {target}}}'", details


def _given_pixels(ctx: Context) -> int | None:
    """The max_pixels serve passed (or the log's arguments show), if any."""
    kwargs = ctx.given("--mm-processor-kwargs") or ""
    m = re.search(r"""["']?max_pixels["']?\s*:\s*(\d{1,12})""", kwargs)
    return int(m.group(1)) if m else None


def encoder_stall(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    hit = hits[-1]
    step, details = _pixels(hit, ctx)
    given = _given_pixels(ctx)
    steps = [step]
    if given is not None:
        budget = int(hit.groups.get("budget", "0"))
        patch = _patch(ctx)
        allows = given // patch.pixels_per_token if patch else 0
        details.append(
            f"max_pixels {given} was given (--mm-processor-kwargs)"
            + (f": {allows} tokens per image at most" if allows else "")
        )
        steps = [
            f"max_pixels {given} was given and did not take effect: vLLM still stalls "
            f"profiling the encoder cache ({budget} tokens)",
            "smaller images per prompt: --limit-mm-per-prompt '{\"image\": 1}' (and 0 for "
            "modalities not used)",
            "a smaller encoder cache budget: a lower --max-num-batched-tokens",
        ]
    if ctx.arg("mm_encoder_tp_mode") == "data":
        steps.append("drop --mm-encoder-tp-mode data on one GPU")
    if ctx.arg("mm_processor_cache_type") == "shm":
        steps.append("drop --mm-processor-cache-type shm (the default cache on one GPU)")
    steps.append("send images scaled to a long side of about 1600 px at most")
    return Fix(
        summary=(
            f"the log stops where vLLM profiles the encoder cache ({hit.groups.get('budget')} "
            f"tokens, {hit.groups.get('items')} {hit.groups.get('modality')} "
            f"{'item' if hit.groups.get('items') == '1' else 'items'})"
        ),
        meaning=(
            "Without a max_pixels limit vLLM profiles with the largest image the model "
            "accepts; building and encoding that dummy image on a small GPU looks like a hang."
        ),
        steps=tuple(steps),
        details=(*details, *ctx.gpu_details()),
        next=(_plan(ctx),),
    )


def switch_read(vllm: str) -> str:
    from packaging.version import InvalidVersion, Version

    try:
        reads = Version(vllm) >= Version(WSL2_PIN_FIRST)
    except InvalidVersion:
        return f"vLLM reads {WSL2_PIN_SWITCH} from {WSL2_PIN_FIRST} on"
    return (
        f"vLLM {vllm} reads {WSL2_PIN_SWITCH} (from {WSL2_PIN_FIRST} on)"
        if reads
        else f"vLLM {vllm} does not read {WSL2_PIN_SWITCH}: it arrived in {WSL2_PIN_FIRST}"
    )


def uva(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    details = []
    if ctx.facts.wsl_pin_memory_off:
        details.append("the log says vLLM turned pinned memory off because WSL was detected")
    if WSL2_PIN_SWITCH in ctx.facts.env:
        details.append(
            f"{WSL2_PIN_SWITCH}={ctx.facts.env[WSL2_PIN_SWITCH]} in the log's environment"
        )
    if ctx.vllm:
        details.append(switch_read(ctx.vllm))
    return Fix(
        summary="pinned host memory (UVA) is not available",
        meaning=(
            "vLLM's V1 engine keeps buffers in pinned host memory that the GPU reads through "
            "UVA; WSL2's GPU paravirtualisation does not give it by default, so vLLM turns "
            "pinning off there and the engine cannot start. An environment problem, not the "
            "model's."
        ),
        steps=(
            f"{WSL2_PIN_SWITCH}=1 with a vLLM that reads it ({WSL2_PIN_FIRST} or newer), on a "
            "WSL2 kernel of 4.19.121 or newer (wsl --update)",
            "or run vLLM on native Linux",
        ),
        details=tuple(details),
        next=("envkit doctor", "envkit explain --diff SWITCH-ON.log SWITCH-OFF.log"),
    )


def bf16(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    name, cc = first(hits, "gpu"), first(hits, "capability")
    return Fix(
        summary=f"{name or 'this GPU'} has no bfloat16"
        + (f" (compute capability {cc})" if cc else ""),
        meaning="bfloat16 needs compute capability 8.0 (Ampere) or newer; the model asks for it.",
        steps=("--dtype half (float16: the same 2 bytes per parameter)",),
        details=ctx.gpu_details(name),
        next=(_plan(ctx, " --dtype half"),),
    )


def shm(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    return Fix(
        summary="shared memory (/dev/shm) ran out",
        meaning=(
            "vLLM's processes and NCCL pass tensors through /dev/shm; Docker gives a container "
            "64 MB of it unless told otherwise."
        ),
        steps=(
            "docker run --ipc=host (or --shm-size 16g); in Compose: ipc: host or shm_size: 16gb",
            "NCCL_SHM_DISABLE=1 only as a last resort (slower)",
        ),
        next=("envkit doctor",),
    )


def nccl(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    text = " ".join(h.line.text for h in hits)
    kind = re.search(r"unhandled (?:system|cuda) error|internal error|remote process", text)
    version = re.search(r"NCCL version ([\d.]+)", text)
    details = [f"NCCL says: {kind.group(0)}"] if kind else []
    details += [f"NCCL {version.group(1)}"] if version else []
    return Fix(
        summary="NCCL, the GPUs' communication library, failed",
        meaning=(
            "Tensor parallelism moves data between GPUs with NCCL; it fails on missing "
            "peer-to-peer access (consumer GPUs, VMs), a small /dev/shm or the network."
        ),
        steps=(
            "run again with NCCL_DEBUG=INFO to see the call that failed",
            "NCCL_P2P_DISABLE=1 where the GPUs have no peer-to-peer path",
            "docker run --ipc=host (shared memory)",
        ),
        details=(*details, *ctx.gpu_details()),
        next=("envkit doctor",),
    )


def fabric(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    return Fix(
        summary="CUDA error 802: system not yet initialized",
        meaning=(
            "On NVSwitch machines (HGX A100, H100, H200, B200) CUDA waits for NVIDIA Fabric "
            "Manager, which is not running or is not the driver's exact version."
        ),
        steps=(
            "systemctl status nvidia-fabricmanager; install nvidia-fabricmanager of the "
            "driver's exact version and start it",
        ),
        details=ctx.gpu_details(),
        next=("envkit doctor",),
    )


BUILDERS: dict[Code, Builder] = {
    Code.FREE_MEMORY: free_memory,
    Code.KV_CACHE_TOO_SMALL: kv_cache,
    Code.CUDA_OOM: cuda_oom,
    Code.ENCODER_CACHE_PROFILING: encoder_stall,
    Code.UVA_UNAVAILABLE: uva,
    Code.BF16_UNSUPPORTED: bf16,
    Code.SHM_TOO_SMALL: shm,
    Code.NCCL_ERROR: nccl,
    Code.FABRIC_MANAGER: fabric,
}
