"""Fixes for how vLLM is started and what it reaches at start-up: ports (the server's and
the internal ones), the host's OOM killer, PTX from a newer toolchain, FlashInfer's JIT
build and downloads, Xet transfers, config conflicts with transformers 5, the remote-code
prompt; and what explain says of a log that ends mid-boot or is not vLLM's."""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

from envkit.serving.explain.fixcontext import Builder, Context, Fix, first, free_port_after
from envkit.serving.explain.signatures import Code
from envkit.serving.explain.watch import Hit

_INTERNAL = re.compile(r"server socket|TCPStore|c10d|DistNetworkError|get_open_port|zmq", re.I)
_PORT = re.compile(r"port[:= ]+(\d{2,5})\b|\]:(\d{2,5})\b|:(\d{2,5}) \(errno")


def _text(hits: tuple[Hit, ...]) -> str:
    return " ".join(h.line.text for h in hits)


def _named_port(hits: tuple[Hit, ...]) -> str:
    if port := first(hits, "port"):
        return port
    m = _PORT.search(_text(hits))
    return next((g for g in m.groups() if g), "") if m else ""


def port_in_use(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    text = _text(hits)
    named = _named_port(hits)
    at = hits[0].line.number if hits else 0
    framed = any(at - 12 <= n <= at for n in ctx.facts.internal_bind)  # its traceback's frames
    if _INTERNAL.search(text) or framed:
        which = f"port {named}" if named else "a port the log does not name"
        base = free_port_after(int(named)) if named.isdigit() else None
        return Fix(
            summary=f"an internal port of vLLM is in use ({which}), not the API server's",
            meaning=(
                "vLLM's processes meet through torch's TCPStore and ZeroMQ sockets on "
                "ports of their own (get_open_port, from VLLM_PORT when set); another vLLM or "
                "torch.distributed job on this machine still holds "
                + (f"port {named}." if named else "one of them.")
            ),
            steps=(
                "stop the earlier vLLM or distributed job (ps -ef | grep -i vllm)",
                f"or give this one other internal ports: VLLM_PORT={base} (free on 127.0.0.1 now)"
                if base
                else "or give this one other internal ports: VLLM_PORT=PORT (a free one)",
            ),
            details=(f"the log names port {named}",) if named else (),
        )
    port = named or ctx.given("--port") or ""
    steps = []
    if port.isdigit():
        free = free_port_after(int(port))
        steps.append(
            f"--port {free} (free on 127.0.0.1 now)" if free else "--port with a free port"
        )
        steps.append(f"or stop what listens there (ss -ltnp 'sport = :{port}')")
    else:
        steps.append("--port with a free port, or stop what listens on the one vLLM wanted")
    steps.append("in Compose, change the host side of ports:")
    said = (
        f"port {port}"
        if named
        else f"port {port} (the --port the log's arguments show)"
        if port
        else "the port vLLM wanted (the log does not name it)"
    )
    return Fix(
        summary=f"{said} is already in use",
        meaning="Another process (often an earlier vLLM) listens on the port the server wants.",
        steps=tuple(steps),
        next=(f"envkit probe http://127.0.0.1:{port}/v1 (is a server already answering?)",)
        if port
        else (),
    )


def host_oom(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    return Fix(
        summary="the host's OOM killer stopped vLLM (Killed, exit 137, SIGKILL)",
        meaning=(
            "The kernel killed a vLLM process because the machine or the container ran out "
            "of host memory (RAM, not GPU memory): loading weights through the CPU, several "
            "processes each holding a copy, a container memory limit."
        ),
        steps=(
            "dmesg | grep -i -e oom -e killed (or docker inspect -f '{{.State.OOMKilled}}' NAME)",
            "more host memory for the container (docker run --memory, Compose mem_limit) or swap",
            "fewer copies in memory: a lower --max-num-seqs, no --cpu-offload-gb, "
            "--swap-space lower (vLLM reserves it in host memory)",
        ),
        next=("envkit doctor",),
    )


def _cuda_of(profile_cuda: str, driver_cuda: str) -> bool:
    try:
        return Version(profile_cuda) <= Version(driver_cuda)
    except InvalidVersion:
        return False


def ptx_toolchain(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    facts = ctx.facts
    torch_cuda = next((p.cuda for p in ctx.pinned() if p.cuda), "")
    details = []
    if facts.driver:
        details.append(f"driver {facts.driver} runs CUDA {facts.driver_cuda} (nvidia-smi)")
    if torch_cuda:
        details.append(f"torch is built for CUDA {torch_cuda} ({ctx.profile_name()})")
    fitting = [
        p.name
        for p in ctx.knowledge.profiles()
        if facts.driver_cuda and p.cuda and _cuda_of(p.cuda, facts.driver_cuda)
    ]
    steps = [
        "update the NVIDIA driver to the one of torch's CUDA toolkit (NVIDIA's table)"
        + (f": CUDA {torch_cuda}" if torch_cuda else ""),
    ]
    if fitting:
        steps.append(f"or a profile built for CUDA {facts.driver_cuda} at most: {fitting[0]}")
        steps.append(ctx.build(fitting[0]))
    else:
        steps.append("or a torch and vLLM built for the driver's own CUDA version")
    return Fix(
        summary="the driver cannot load PTX compiled by a newer CUDA toolchain",
        meaning=(
            "The driver is within torch's CUDA major but older than its minor: minor version "
            "compatibility runs the prebuilt kernels, but PTX the newer toolkit compiled (Triton's "
            "kernels, JIT-built ones) does not load. Not a warning: the first such kernel fails."
        ),
        steps=tuple(steps),
        details=tuple(details),
        next=(
            f"envkit verify {ctx.profile_name()} --venv {ctx.venv or '.venv'}"
            + (
                f" {ctx.gpu_option()} --driver {facts.driver}"
                if facts.driver and (ctx.gpu or ctx.gpus())
                else ""
            ),
        ),
    )


def flashinfer_jit(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    text = _text(hits).lower()
    download = "download" in text
    return Fix(
        summary="FlashInfer could not "
        + ("download its kernels" if download else "build a kernel at start-up (JIT)"),
        meaning=(
            "Without its ahead-of-time kernels (flashinfer-cubin, flashinfer-jit-cache of "
            "flashinfer-python's version) FlashInfer downloads cubins or compiles kernels "
            "when vLLM starts, which needs the network, or nvcc and ninja (a CUDA toolkit) "
            "that a runtime image does not have."
        ),
        steps=(
            "uv pip install flashinfer-cubin flashinfer-jit-cache of flashinfer-python's "
            "version (the kernels ahead of time)",
            "or another attention backend (--attention-backend FLASH_ATTN; "
            "VLLM_ATTENTION_BACKEND=FLASH_ATTN in older releases)",
            "or nvcc and ninja on PATH (CUDA_HOME set) where kernels must be built",
        ),
        next=(f"envkit doctor{ctx.venv_words()}",),
    )


def xet_transfer(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    text = _text(hits).lower()
    kind = (
        "rate-limited (429)"
        if "429" in text or "too many requests" in text
        else "refused by TLS"
        if re.search(r"\btls\b|ssl|certificate", text)
        else "retried and gave up"
    )
    setting = ctx.facts.env.get("HF_HUB_DISABLE_XET")
    return Fix(
        summary=f"a download through Hugging Face's Xet storage was {kind}",
        meaning=(
            "huggingface_hub downloads large files through hf-xet from the Xet CAS service; "
            "its own retries, rate limits or a proxy that rewrites TLS end the download."
        ),
        steps=(
            "HF_HUB_DISABLE_XET=1 (the classic download)"
            + (f"; the log shows HF_HUB_DISABLE_XET={setting}" if setting else ""),
            "429: wait, or set HF_TOKEN (higher limits); TLS: the proxy's CA in "
            "SSL_CERT_FILE; retries: a newer hf-xet",
            "or download once (hf download MODEL) and serve the local folder",
        ),
        next=(f"envkit doctor{ctx.venv_words()}",),
    )


def config_conflict(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    modern, legacy = first(hits, "modern"), first(hits, "legacy")
    tf = ctx.facts.transformers_version or (
        ctx.installed.get("transformers") if ctx.installed else ""
    )
    compat = f"envkit compat vllm=={ctx.vllm} transformers=={tf}" if ctx.vllm and tf else ""
    return Fix(
        summary=f"vLLM refuses the config's RoPE fields: {modern} against {legacy}",
        meaning=(
            "transformers 5 rewrites a RoPE dict's rope_type (Qwen2-VL: default for "
            "type=mrope) and keeps the legacy type; this vLLM refuses the two differing. "
            "envkit compat names this pair config-conflict."
        ),
        steps=(
            "transformers<5 with this vLLM, in one resolution with it"
            + (f" (uv pip install {ctx.uv_python()}'transformers<5')" if ctx.venv else ""),
            f"or {ctx.build()}",
        ),
        details=(f"transformers {tf}",) if tf else (),
        next=(compat,) if compat else (f"envkit doctor{ctx.venv_words()}",),
    )


def remote_code_prompt(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    given = ctx.given("--trust-remote-code")
    trusted = given is not None and given.lower() not in ("false", "0", "none")
    if trusted:
        return Fix(
            summary="transformers asked to run the model's own code although "
            "trust_remote_code was set",
            meaning=(
                "The recorded arguments set trust_remote_code, so vLLM's own loads pass it; "
                "the prompt comes from a load that does not (a processor, tokenizer or plugin "
                "loaded with transformers directly, or another model such as a draft model)."
            ),
            steps=(
                "find the load in the traceback above the prompt and pass "
                "trust_remote_code=True there",
                "in a container without a terminal the prompt fails at once or waits forever",
            ),
            details=(f"trust_remote_code={given} in the recorded arguments",),
            next=(f"envkit check-model {ctx.profile_name()} {ctx.model}",),
        )
    return Fix(
        summary="the model needs its own code and it was not trusted",
        meaning=(
            "config.json's auto_map names classes shipped with the checkpoint; transformers "
            "asks before running them ('Do you wish to run the custom code? [y/N]') and, "
            "without a terminal or without the flag, refuses."
        ),
        steps=("read the checkpoint's code, then start with --trust-remote-code",),
        details=("trust_remote_code is not in the recorded arguments",),
        next=(f"envkit check-model {ctx.profile_name()} {ctx.model}",),
    )


def incomplete(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    number, text = ctx.facts.last_info
    last = ctx.scan.last_line
    step = f"line {number}: {text}" if number else "no step of vLLM's start"
    return Fix(
        summary=f"the log ends at line {last} mid-boot; the last step it shows is {step}",
        meaning=(
            "Neither a failure nor a started server: the log was captured before vLLM got "
            "further (a container still starting, output cut), or vLLM is still working on "
            "that step (loading weights, compiling, profiling)."
        ),
        steps=(
            "capture the whole log once vLLM has finished or stopped "
            "(docker logs NAME > vllm.log 2>&1)",
        ),
        next=("envkit explain vllm.log",),
    )


def not_vllm(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    return Fix(
        summary="nothing in this log is vLLM's",
        meaning=(
            "No line carries vLLM's header, a vLLM process prefix, its version or its name: "
            "this is another program's log (a client application's), and its errors do not "
            "say why vLLM did or did not start."
        ),
        steps=("give vLLM's own output: docker logs NAME 2>&1, or the terminal vllm serve ran in",),
        next=("envkit probe http://127.0.0.1:8000/v1 (is a server answering?)",),
    )


def model_type_loaded(hits: tuple[Hit, ...], ctx: Context) -> Fix:
    model_type = first(hits, "model_type")
    arch, line = next(((a, n) for a, n in ctx.facts.resolved if _same_type(a, model_type)), ("", 0))
    return Fix(
        summary=f"model type {model_type} is known: this process loaded {arch} at line {line}",
        meaning=(
            "The same process resolved an architecture of this model type and loaded its "
            "weights before this error, so the installed transformers (or vLLM's own config) "
            "knows it: the failing load read another config.json (a draft model, a processor "
            "or tokenizer folder, a path that holds another checkpoint's files)."
        ),
        steps=(
            "check the path the failing load read (in the traceback) and its config.json",
            "a separate tokenizer or processor path (--tokenizer) must hold that model's files",
        ),
        details=(f"line {line}: Resolved architecture: {arch}",),
        next=(f"envkit check-model {ctx.profile_name()} {ctx.model}",),
    )


def _same_type(architecture: str, model_type: str) -> bool:
    head = re.split(r"For[A-Z]|Model$", architecture)[0]
    return bool(model_type) and head.lower().replace("_", "") == model_type.lower().replace("_", "")


def loaded_before(hits: tuple[Hit, ...], ctx: Context) -> bool:
    """model-type-unknown for a type this process already loaded (resolved its
    architecture, then loaded weights, both before the error)."""
    if not hits:
        return False
    model_type, at = first(hits, "model_type"), hits[0].line.number
    weights = ctx.facts.weights_line
    return any(
        _same_type(a, model_type) and n < at and weights is not None and n < weights < at
        for a, n in ctx.facts.resolved
    )


BUILDERS: dict[Code, Builder] = {
    Code.PORT_IN_USE: port_in_use,
    Code.HOST_OOM: host_oom,
    Code.PTX_TOOLCHAIN: ptx_toolchain,
    Code.FLASHINFER_JIT: flashinfer_jit,
    Code.XET_TRANSFER: xet_transfer,
    Code.CONFIG_CONFLICT: config_conflict,
    Code.REMOTE_CODE_PROMPT: remote_code_prompt,
    Code.INCOMPLETE: incomplete,
    Code.NOT_VLLM: not_vllm,
    Code.MODEL_TYPE_LOADED: model_type_loaded,
}
