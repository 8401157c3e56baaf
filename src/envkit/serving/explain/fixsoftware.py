"""Fixes for what is installed and how it is started: transformers drift, model types and
architectures a release does not know, remote code, kernels that do not link, CUDA
libraries and drivers, FlashInfer, downloads from the Hub, ports, the spawn guard and the
engine's wrapper. Built from the profiles' pins and what each loads (:mod:`knowledge`)."""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

from envkit.serving.explain.fixcontext import Builder, Context, Fix, first, profiles_text
from envkit.serving.explain.knowledge import loading, newest_first
from envkit.serving.explain.signatures import Code
from envkit.serving.explain.watch import Hit

_TORCH_SYMBOL = re.compile(r"^_ZN?K?(?:3c10|2at|5torch)")


def _loading_fix(ctx: Context, model_type: str, architecture: str) -> tuple[list[str], list[str]]:
    """(steps, details) naming the profiles that load the model, or a new profile."""
    names = loading(ctx.knowledge, model_type, architecture)
    what = model_type or architecture
    steps = (
        [f"a profile that loads {what}: {profiles_text(names[:3], ctx.knowledge)}"] if names else []
    )
    details = [
        f"{p.name} (vLLM {p.vllm}, transformers {p.transformers}) does not load {what}"
        for p in ctx.pinned()
        if p.name not in names
    ]
    if names:
        steps.append(ctx.build(names[0]))
    else:
        steps.append(
            f"envkit new-profile NAME --for-model {ctx.model} (solves for a vLLM that loads it)"
        )
    return steps, details


def transformers_too_new(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    g = hits[0].groups
    if "attribute" in g:
        summary = f"{g.get('object')} has no attribute {g['attribute']}"
    elif "name" in g:
        summary = f"transformers has no {g['name']} in {g.get('module')}"
    else:
        summary = f"transformers has no module {g.get('missing')}"
    pinned = ctx.pinned()
    steps: list[str] = []
    details: list[str] = []
    if pinned:
        p = pinned[0]
        details.append(f"{p.name} pins transformers {p.transformers} for vLLM {p.vllm}")
        steps += [
            f"uv pip install {ctx.uv_python()}'vllm=={p.vllm}' 'transformers=={p.transformers}' "
            "(one resolution)",
            f"or {ctx.build(ctx.profile or p.name)}",
        ]
    elif ctx.vllm:
        steps.append(
            f"envkit new-profile NAME --for-model {ctx.model} --vllm {ctx.vllm} (pins the "
            "transformers it was released with)"
        )
    installed = ctx.installed.get("transformers") if ctx.installed else ""
    tf = installed or ctx.facts.transformers_version
    if not pinned and not ctx.vllm:  # no version to pin for: the bound the drift crossed
        major = tf.split(".")[0] if tf[:1].isdigit() else "5"
        where = ctx.uv_python()
        steps.append(
            f"uv pip install {where}'transformers<{major}' (this vLLM needs the transformers "
            f"before {major}.0; the log names no vLLM version to pin for)"
        )
    if tf and ctx.vllm:
        details.append(f"see what breaks: envkit compat vllm=={ctx.vllm} transformers=={tf}")
    # vLLM's own metadata: up to 0.11.0 a lower bound alone, under which a resolver takes
    # transformers 5; later releases bound it in ways that vary (a cap, exclusions, a higher
    # floor), so their failure is said only as the error says it
    try:
        drifted = Version(ctx.vllm) <= Version("0.11.0")
    except InvalidVersion:  # no release named: the drift, by far the commonest case
        drifted = True
    return Fix(
        summary=summary,
        meaning=(
            f"vLLM{' ' + ctx.vllm if ctx.vllm else ''} uses a transformers API the installed "
            "transformers does not have"
            + (
                ": releases up to 0.11.0 ask only for a lower bound, so a resolver today takes "
                "transformers 5, which removed APIs they call."
                if drifted
                else " (removed or renamed in it)."
            )
        ),
        steps=tuple(steps),
        details=tuple(details),
        next=(f"envkit doctor{' --profile ' + pinned[0].name if pinned else ''}",),
    )


def model_type_unknown(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    model_type = first(hits, "model_type")
    steps, details = _loading_fix(ctx, model_type, "")
    return Fix(
        summary=f"transformers does not know model type {model_type or '(none given)'}",
        meaning=(
            "config.json names a model type the installed transformers has no config class "
            "for, and this vLLM brings none of its own: a newer transformers alone is not "
            "enough when vLLM's registry lacks the architecture too."
        ),
        steps=tuple(steps),
        details=tuple(details),
        next=(f"envkit which {ctx.model}",),
    )


def architecture_unsupported(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    names = re.findall(r"\w+", first(hits, "architectures")) or [first(hits, "architecture")]
    steps, details = _loading_fix(ctx, "", names[0])
    return Fix(
        summary=f"vLLM{' ' + ctx.vllm if ctx.vllm else ''} has no model class {names[0]}",
        meaning="The architecture config.json names is not in this vLLM's model registry.",
        steps=tuple(steps),
        details=tuple(details),
        next=(f"envkit history {names[0]}", f"envkit which {ctx.model}"),
    )


def remote_code(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    if first(hits, "variant") == "breaks":
        return Fix(
            summary="the model's own code fails against the installed transformers",
            meaning=(
                "The checkpoint ships Python code (transformers_modules/...) that imports or "
                "reads a transformers API this transformers lacks."
            ),
            steps=(
                "install the transformers the model card names, in one resolution with vLLM",
                f"envkit which {ctx.model} (the shipped profiles' verdicts)",
            ),
            details=tuple(
                f"{p.name} pins transformers {p.transformers}"
                for p in newest_first(ctx.knowledge.profiles())
            ),
            next=(f"envkit check-model {ctx.profile_name()} {ctx.model}",),
        )
    return Fix(
        summary="the model needs its own code and it was not trusted",
        meaning="config.json's auto_map names classes shipped with the checkpoint.",
        steps=("read the checkpoint's code, then start with --trust-remote-code",),
        next=(f"envkit check-model {ctx.profile_name()} {ctx.model}",),
    )


def undefined_symbol(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    symbol, library = first(hits, "symbol"), first(hits, "library")
    details = [f"{library or 'a library'} needs {symbol}"]
    if _TORCH_SYMBOL.match(symbol):
        meaning = (
            "vLLM's compiled kernels call a torch function this torch does not define: torch "
            "is another version or build than the one this vLLM was compiled against "
            "(pip install -U torch under vLLM, or another CUDA build of the same torch)."
        )
        steps = [
            f"uv pip install {ctx.uv_python()}'vllm=={p.vllm}' 'torch=={p.torch}' --torch-backend "
            f"cu{p.cuda.replace('.', '')} (as {p.name} pins it)"
            for p in ctx.pinned()
            if p.torch and p.cuda
        ] or ["reinstall vLLM and the torch its wheel requires in one resolution"]
    else:
        meaning = f"{library or 'A compiled extension'} was built against other libraries."
        steps = ["reinstall that package for the installed torch and CUDA"]
    return Fix(
        summary=f"undefined symbol {symbol}",
        meaning=meaning,
        steps=tuple(steps),
        details=tuple(details),
        next=(
            f"envkit verify {ctx.profile_name()} --venv {ctx.venv or '.venv'} (its kernels check)",
        ),
    )


def cuda_runtime_missing(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    library = first(hits, "library")
    if not library or library.startswith(("libcuda.so", "libnvidia-ml")):
        return Fix(
            summary=f"{library + ' is missing: ' if library else ''}no NVIDIA driver is visible",
            meaning=(
                "The process sees no GPU driver: a container started without GPUs or without "
                "the NVIDIA Container Toolkit, or on WSL2 a library path without /usr/lib/wsl/lib."
            ),
            steps=(
                "docker run --gpus all (Compose: deploy.resources.reservations.devices with "
                "driver: nvidia and capabilities: [gpu])",
                "nvidia-smi inside the container must list the GPU",
            ),
            next=("envkit doctor",),
        )
    return Fix(
        summary=f"{library} cannot be loaded",
        meaning=(
            "A CUDA library a package was built against is not installed: a mixed install "
            "(pip and uv, a system Python) or an LD_LIBRARY_PATH that hides torch's own copies."
        ),
        steps=(f"reinstall vLLM and torch in one resolution ({ctx.build()})",),
        next=("envkit doctor",),
    )


def _cuda(found: str) -> str:
    number = int(found)
    return f"{number // 1000}.{number % 1000 // 10}"


def _fits(cuda: str, limit: str, below: bool) -> bool:
    try:
        return (Version(cuda) <= Version(limit)) if below else (Version(cuda) >= Version(limit))
    except InvalidVersion:
        return False


def driver_too_old(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    found = first(hits, "found")
    cuda = _cuda(found) if found.isdigit() and len(found) <= 6 else ""
    fitting = [p for p in ctx.knowledge.profiles() if cuda and _fits(p.cuda, cuda, below=True)]
    steps = (
        [
            "a profile whose torch build this driver runs: "
            + profiles_text([p.name for p in fitting], ctx.knowledge)
        ]
        if fitting
        else []
    )
    steps.append("or update the NVIDIA driver")
    return Fix(
        summary=f"the NVIDIA driver is too old{f': it runs CUDA {cuda} at most' if cuda else ''}",
        meaning="torch's CUDA build needs a newer driver than the one installed.",
        steps=tuple(steps),
        details=(f"found version {found}: CUDA {cuda}",) if cuda else (),
        next=(
            f"envkit new-profile NAME --for-model {ctx.model}"
            + (f" --cuda {cuda}" if cuda else ""),
        ),
    )


def no_kernel_image(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    sm, name = first(hits, "sm"), first(hits, "gpu")
    gpus = ctx.gpus(name)
    newer = sm.startswith("sm_1") or any(g.capability >= (10, 0) for g in gpus)
    fitting = [p.name for p in ctx.knowledge.profiles() if _fits(p.cuda, "12.8", below=False)]
    steps = (
        [f"a CUDA 12.8 or newer build: {profiles_text(fitting, ctx.knowledge)}"]
        if newer and fitting
        else ["a torch and vLLM built for this GPU's compute capability"]
    )
    return Fix(
        summary=f"no kernels for this GPU{f' ({sm})' if sm else ''}",
        meaning=(
            "The installed torch or vLLM carries no code for this GPU's architecture: a GPU "
            "newer than the build (Blackwell needs CUDA 12.8), or older than vLLM supports."
        ),
        steps=tuple(steps),
        details=ctx.gpu_details(name),
        next=(f"envkit new-profile NAME --for-model {ctx.model} --cuda 12.8",)
        if newer
        else ("envkit doctor",),
    )


def forward_compat(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    env = ctx.facts.env
    details = [
        f"{k}={env[k]}" for k in ("VLLM_ENABLE_CUDA_COMPATIBILITY", "LD_LIBRARY_PATH") if k in env
    ]
    return Fix(
        summary="CUDA's forward-compatibility libraries were loaded where they do not work",
        meaning=(
            "cuda-compat lets an older datacenter driver run a newer CUDA; GeForce and RTX "
            "GPUs refuse it (error 804), and a compat library that does not match the driver "
            "fails with error 803."
        ),
        steps=(
            "take the compat folder (/usr/local/cuda/compat, a cuda-compat package) off "
            "LD_LIBRARY_PATH and unset VLLM_ENABLE_CUDA_COMPATIBILITY",
            "or use a torch build for the driver's own CUDA version",
        ),
        details=(*details, *ctx.gpu_details()),
        next=("envkit doctor",),
    )


def flashinfer(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    version = re.search(r"flashinfer-python ([\w.]+)", " ".join(h.line.text for h in hits))
    v = version.group(1) if version else "X"
    return Fix(
        summary="FlashInfer's kernels do not match flashinfer-python",
        meaning=(
            "flashinfer-cubin and flashinfer-jit-cache must be the version of flashinfer-python; "
            "otherwise FlashInfer compiles at start-up for minutes or refuses to import."
        ),
        steps=(
            f"uv pip install {ctx.uv_python()}'flashinfer-python=={v}' 'flashinfer-cubin=={v}' "
            "(the same version)",
            "or another attention backend (--attention-backend, VLLM_ATTENTION_BACKEND in "
            "older releases)",
        ),
        next=("envkit doctor",),
    )


def spawn_guard(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    return Fix(
        summary="a script started vLLM at import time under the spawn start method",
        meaning=(
            "vLLM starts its workers with spawn, which imports the main script again in each; "
            "code at module level that creates LLM(...) then runs once more in every worker."
        ),
        steps=('put the code that creates LLM(...) under if __name__ == "__main__":',),
    )


def xet(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    setting = ctx.facts.env.get("HF_HUB_DISABLE_XET")
    return Fix(
        summary="the Hugging Face Xet storage refused the download (HTTP 401)",
        meaning=(
            "Downloads through the Xet backend (cas-server.xethub.hf.co) are authorised "
            "separately; an old hf-xet or a missing token for a gated model fails there."
        ),
        steps=(
            "HF_HUB_DISABLE_XET=1 (the classic download)",
            "HF_TOKEN for gated models (never printed into a log); hf-xet 1.1.7 or newer",
        ),
        details=(f"HF_HUB_DISABLE_XET={setting} in the log's environment",) if setting else (),
        next=("envkit doctor",),
    )


def hf_unauthorized(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    text = " ".join(h.line.text for h in hits)
    repo = re.search(r"huggingface\.co/(?:api/models/)?([\w.-]+/[\w.-]+)", text)
    name = repo.group(1) if repo else ctx.model
    return Fix(
        summary=f"the Hugging Face Hub refused access to {name}",
        meaning="A gated or private model: the Hub needs a token of an account that has access.",
        steps=(
            f"accept the model's terms at https://huggingface.co/{name}",
            "set HF_TOKEN (or hf auth login); in a container pass it with -e HF_TOKEN",
        ),
        next=(f"envkit check-model {ctx.profile_name()} {name}",),
    )


def engine_core(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    procs = first(hits, "procs")
    killed = bool(re.search(r":\s*-9\b|\b137\b", procs))
    return Fix(
        summary="vLLM's engine process died during start-up"
        + (f" (exit codes {procs})" if procs and procs != "{}" else ""),
        meaning=(
            "This line only points up to the engine's own error, which is not in this log"
            + (
                "; exit -9 is SIGKILL, usually the kernel's OOM killer (host memory)."
                if killed
                else "."
            )
        ),
        steps=(
            "capture all of vLLM's output, both streams (docker logs NAME 2>&1)",
            "dmesg or the container's memory limit, when a process was killed",
        ),
    )


def unknown(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    return Fix(
        summary=hits[0].line.text if hits else "the log ends without a start or a known error",
        meaning="A failure envkit does not know; its first error lines are shown.",
        steps=(),
        next=("envkit doctor",),
    )


def healthy(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    port = ctx.arg("port") or "8000"
    return Fix(
        summary="vLLM started and serves",
        meaning="",
        steps=(),
        next=(f"envkit probe http://127.0.0.1:{port}/v1",),
    )


BUILDERS: dict[Code, Builder] = {
    Code.TRANSFORMERS_TOO_NEW: transformers_too_new,
    Code.MODEL_TYPE_UNKNOWN: model_type_unknown,
    Code.ARCHITECTURE_UNSUPPORTED: architecture_unsupported,
    Code.REMOTE_CODE_TRANSFORMERS: remote_code,
    Code.UNDEFINED_SYMBOL: undefined_symbol,
    Code.CUDA_RUNTIME_MISSING: cuda_runtime_missing,
    Code.DRIVER_TOO_OLD: driver_too_old,
    Code.NO_KERNEL_IMAGE: no_kernel_image,
    Code.CUDA_FORWARD_COMPAT: forward_compat,
    Code.FLASHINFER_MISMATCH: flashinfer,
    Code.SPAWN_MAIN_GUARD: spawn_guard,
    Code.XET_UNAUTHORIZED: xet,
    Code.HF_UNAUTHORIZED: hf_unauthorized,
    Code.ENGINE_CORE_FAILED: engine_core,
    Code.UNKNOWN: unknown,
    Code.NONE: healthy,
}
