"""The failures envkit recognises in a vLLM boot log: stable codes and the message shapes
vLLM, torch, CUDA, NCCL, transformers and huggingface_hub print for each, across releases.

Each :class:`Signature` has a role: a **cause** (the error that stops the start), a
**wrapper** (a line that only points up to the cause, such as ``Engine core initialization
failed. See root cause above.``), a **stall** point (where a start that hangs stops
printing), **progress** past such a point, or the **healthy** start. Patterns are our own,
written against the shapes the real releases print (vLLM 0.8.5, 0.11.2 and 0.33.0's wheels,
read for this); each signature's ``keywords`` (lower case) gate its regex so that most lines
never reach one.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from enum import Enum

_NAMES = itertools.count()


def in_order(*parts: str) -> str:
    """A regex that finds ``parts`` on one line in this order, consuming up to the end of
    the last, in linear time: ``A.*B`` tries the rest of the line again from every ``A``
    (quadratic), where this takes each part's first occurrence after the one before and
    never another (a lookahead is atomic, and its text is then consumed by a backreference).
    Anchored at the line's start, so a search tries nowhere else. The helper groups are
    named ``_N`` (``match`` drops them)."""
    out = r"\A"
    for part in parts:
        name = f"_{next(_NAMES)}"
        out += f"(?=(?P<{name}>.*?(?:{part})))(?P={name})"
    return out


class Code(str, Enum):
    TRANSFORMERS_TOO_NEW = "transformers-too-new"
    MODEL_TYPE_UNKNOWN = "model-type-unknown"
    ARCHITECTURE_UNSUPPORTED = "architecture-unsupported"
    UVA_UNAVAILABLE = "uva-unavailable"
    FREE_MEMORY = "free-memory-below-utilization"
    KV_CACHE_TOO_SMALL = "kv-cache-too-small"
    CUDA_OOM = "cuda-oom"
    XET_UNAUTHORIZED = "xet-unauthorized"
    HF_UNAUTHORIZED = "hf-unauthorized"
    ENCODER_CACHE_PROFILING = "encoder-cache-profiling"
    UNDEFINED_SYMBOL = "undefined-symbol"
    CUDA_RUNTIME_MISSING = "cuda-runtime-missing"
    DRIVER_TOO_OLD = "driver-too-old"
    NO_KERNEL_IMAGE = "no-kernel-image"
    BF16_UNSUPPORTED = "bf16-unsupported"
    SHM_TOO_SMALL = "shm-too-small"
    NCCL_ERROR = "nccl-error"
    FABRIC_MANAGER = "fabric-manager"
    CUDA_FORWARD_COMPAT = "cuda-forward-compat"
    FLASHINFER_MISMATCH = "flashinfer-mismatch"
    REMOTE_CODE_TRANSFORMERS = "remote-code-transformers"
    SPAWN_MAIN_GUARD = "spawn-main-guard"
    PORT_IN_USE = "port-in-use"
    PTX_TOOLCHAIN = "ptx-toolchain"
    FLASHINFER_JIT = "flashinfer-jit"
    XET_TRANSFER = "xet-transfer"
    CONFIG_CONFLICT = "config-conflict"
    REMOTE_CODE_PROMPT = "remote-code-prompt"
    HOST_OOM = "host-oom"
    GPU_OCCUPIED = "gpu-occupied"  # no signature: an OOM with nothing free before the weights
    MODEL_TYPE_LOADED = "model-type-loaded"  # no signature: model-type-unknown for a loaded type
    ENGINE_CORE_FAILED = "engine-core-failed"
    NONE = "none"
    INCOMPLETE = "log-incomplete"  # no signature: the log ends mid-boot
    NOT_VLLM = "not-a-vllm-log"  # no signature: nothing in the log is vLLM's
    UNKNOWN = "unknown"


class Role(str, Enum):
    CAUSE = "cause"
    WRAPPER = "wrapper"
    STALL = "stall"
    PROGRESS = "progress"
    HEALTHY = "healthy"


@dataclass(frozen=True)
class Signature:
    code: Code
    role: Role
    keywords: tuple[str, ...]  # lower case: one must be in the lower-cased line
    pattern: re.Pattern[str]
    # a cause printed as a warning (torch's UserWarning at CUDA initialisation, NCCL WARN):
    # counted when the start failed; any other warning is never a cause
    warning_ok: bool = False


def _sig(
    code: Code, role: Role, keywords: tuple[str, ...], pattern: str, warning_ok: bool = False
) -> Signature:
    return Signature(code, role, keywords, re.compile(pattern), warning_ok)


C, W = Role.CAUSE, Role.WRAPPER
_XET_401 = r"\b401\b|unauthori[sz]ed"
_XET = r"cas[ _-]?(?:client|service)?[ _]error|xethub|hf[_-]xet|\bxet\b"

# Order matters where two could read one line: the first that matches names it.
SIGNATURES: tuple[Signature, ...] = (
    _sig(
        Code.XET_UNAUTHORIZED,
        C,
        ("xet", "cas "),
        r"(?i)"
        + in_order(r"cas[ _-]?(?:client|service)?[ _]error|xethub|hf[_-]xet", _XET_401)
        + "|"
        + in_order(_XET_401, r"cas-server|xethub"),
    ),
    _sig(
        Code.XET_TRANSFER,
        C,
        ("xet", "cas "),
        r"(?i)"
        + in_order(
            _XET,
            r"retr(?:y|ies|ying)|\b429\b|too many requests|\btls\b|ssl|certificate"
            r"|timed? ?out|connection (?:reset|refused|closed)|\b50[234]\b|error sending request",
        ),
    ),
    _sig(
        Code.CONFIG_CONFLICT,
        C,
        ("found conflicts between",),
        r"Found conflicts between '(?P<modern>[^']{1,200})' \(modern field\) and"
        r" '(?P<legacy>[^']{1,200})' \(legacy field\)",
    ),
    _sig(
        Code.REMOTE_CODE_PROMPT,
        C,
        ("custom code", "trust_remote_code", "execute the configuration file"),
        r"contains custom code which must be executed|Do you wish to run the custom code\?"
        r"|requires you to execute the (?:configuration|modeling) file in that repo"
        r"|(?:pass|set) the (?:argument|option) `?trust_remote_code=True",
    ),
    _sig(
        Code.HF_UNAUTHORIZED,
        C,
        ("gated", "401", "403", "unauthorized", "invalid user token", "repositorynotfound"),
        r"GatedRepoError|Cannot access gated repo|You are trying to access a gated repo"
        r"|(?:401|403) Client Error|Unauthorized for url|Invalid user token"
        r"|Invalid credentials in Authorization header|RepositoryNotFoundError"
        r"|Repository Not Found for url",
    ),
    _sig(
        Code.MODEL_TYPE_UNKNOWN,
        C,
        ("model type", "unrecognized model"),
        r"model type [`'\"]?(?P<model_type>[\w.-]+)[`'\"]? but Transformers does not recognize"
        r"|Unrecognized model in (?P<model>\S+?)\.? Should have a `model_type` key",
    ),
    _sig(
        Code.ARCHITECTURE_UNSUPPORTED,
        C,
        ("model architectures", "is not a registered model"),
        r"Model architectures \[(?P<architectures>[^\][]*)\] (?:are not supported for now"
        r"|failed to be inspected)"
        r"|'(?P<architecture>\w+)' is not a registered model in the Transformers library",
    ),
    _sig(
        Code.SPAWN_MAIN_GUARD,
        C,
        ("bootstrapping", "start a new process"),
        r"start a new process before the\s*(?:current process has finished its)?"
        r"|has finished its bootstrapping phase",
    ),
    _sig(
        Code.UVA_UNAVAILABLE,
        C,
        ("uva", "pinned memory"),
        r"UVA is not available|pinned memory allocation failed"
        r"|" + in_order("cudaHostAlloc", "failed|error") + "|" + in_order("CUDA error: ", "pinned"),
    ),
    _sig(
        Code.FREE_MEMORY,
        C,
        ("free memory on device",),
        r"Free memory on device(?: (?P<device>\S+))? \((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\)"
        r" on startup is less than (?:desired GPU memory utilization|the engine's budget)"
        r"[^(]*\((?P<utilization>[\d.]+), (?P<requested>[\d.]+) GiB\)",
    ),
    _sig(
        Code.KV_CACHE_TOO_SMALL,
        C,
        ("kv cache is needed", "cache blocks", "stored in kv cache"),
        r"No available memory for the cache blocks"
        r"|(?:max seq len \((?P<asked_len>\d+)\), )?"
        r"\((?P<needed>[\d.]+) GiB KV cache is needed, which is larger than the available KV"
        r" cache memory \((?P<available>[\d.]+) GiB\)"
        r"(?:.*?estimated maximum model length is (?P<estimated>\d+))?"
        r"|max seq len \((?P<max_len>\d+)\) is larger than the maximum number of tokens that can"
        r" be stored in KV cache \((?P<kv_tokens>\d+)\)",
    ),
    _sig(
        Code.HOST_OOM,
        C,
        ("killed", "137", "oom-kill", "oom killer"),
        r"^Killed\b|\bline \d+: +\d+ Killed\b"
        r"|(?i:\bexit(?:ed)?(?: with)?(?: code| status)[: =]*137\b)"
        r"|Out of memory: Killed process|\boom-kill\b|\bOOM killer\b|\bOOMKilled\b",
    ),
    _sig(
        Code.CUDA_OOM,
        C,
        ("out of memory", "outofmemory"),
        r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory"
        r"|cudaErrorMemoryAllocation",
    ),
    _sig(
        Code.FLASHINFER_JIT,
        C,
        ("ninja", "nvcc", "cuda_home", "flashinfer"),
        r"(?i)Ninja is required to load C\+\+ extensions"
        r"|No such file or directory: '(?:ninja|nvcc)'|\b(?:ninja|nvcc): (?:command )?not found"
        r"|Could not find nvcc|CUDA_HOME environment"
        r" variable is not set|"
        + in_order("flashinfer", r"jit|compil|build", r"fail|error")
        + "|"
        + in_order("flashinfer", "download", r"fail|error|timed? ?out"),
        warning_ok=True,
    ),
    _sig(
        Code.FLASHINFER_MISMATCH,
        C,
        ("flashinfer",),
        "(?i)"
        + in_order("flashinfer", "do(?:es)? not match|mismatch")
        + "|"
        + in_order("flashinfer", "version", "incompatible|conflict")
        + "|"
        + in_order("importerror|undefined symbol", "flashinfer")
        + "|"
        + in_order("flashinfer", "undefined symbol"),
        warning_ok=True,
    ),
    _sig(
        Code.UNDEFINED_SYMBOL,
        C,
        ("undefined symbol",),
        # the library: the whole path before ": " (a run starts once: linear)
        r"(?:(?<![\w./+-])(?P<library>[\w./+-]+): )?undefined symbol: (?P<symbol>\S+)",
    ),
    _sig(
        Code.FABRIC_MANAGER,
        C,
        ("system not yet initialized", "systemnotready", "system_not_ready", "error 802"),
        r"system not yet initialized|cudaErrorSystemNotReady|CUDA_ERROR_SYSTEM_NOT_READY"
        r"|Error 802\b",
        warning_ok=True,
    ),
    _sig(
        Code.CUDA_FORWARD_COMPAT,
        C,
        ("forward compatibility", "error 803", "error 804", "unsupported display driver"),
        r"forward compatibility was attempted on non supported HW|Error 80[34]\b"
        r"|cudaErrorCompatNotSupportedOnDevice|unsupported display driver / cuda driver",
        warning_ok=True,
    ),
    _sig(
        Code.DRIVER_TOO_OLD,
        C,
        ("too old", "insufficient"),
        r"NVIDIA driver on your system is too old \(found version (?P<found>\d+)\)"
        r"|CUDA driver version is insufficient for CUDA runtime version"
        r"|cudaErrorInsufficientDriver|CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
        warning_ok=True,
    ),
    _sig(
        Code.CUDA_RUNTIME_MISSING,
        C,
        ("cannot open shared object", "no nvidia driver", "no cuda gpus", "infer device type"),
        r"(?<![\w.-])(?P<library>lib(?:cuda|cudart|cublas\w*|cudnn\w*|nvrtc|nccl|cusparse\w*|cufft|curand"
        r"|cusolver|nvJitLink|nvidia-ml)[\w.-]*\.so[\d.]*): cannot open shared object file"
        r"|Found no NVIDIA driver on your system|No CUDA GPUs are available"
        r"|Failed to infer device type",
    ),
    _sig(
        Code.PTX_TOOLCHAIN,
        C,
        ("ptx",),
        r"provided PTX was compiled with an unsupported toolchain|cudaErrorUnsupportedPtxVersion"
        r"|CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
    ),
    _sig(
        Code.NO_KERNEL_IMAGE,
        C,
        ("no kernel image", "nokernelimage", "not compatible with the current pytorch"),
        r"no kernel image is available for execution on the device|cudaErrorNoKernelImageForDevice"
        # the GPU's name starts the line or follows ": " (one start per run: linear)
        r"|(?:(?:^|(?<=: ))(?P<gpu>[\w ]+?) )?with CUDA capability (?P<sm>sm_\d+) is not"
        r" compatible with the current PyTorch installation",
        warning_ok=True,
    ),
    _sig(
        Code.BF16_UNSUPPORTED,
        C,
        ("bfloat16 is only supported",),
        r"Bfloat16 is only supported on GPUs with compute capability of at least 8\.0\."
        r"(?: Your (?P<gpu>.+?) GPU (?:has compute capability (?P<capability>[\d.]+)"
        r"|does not have a compute capability))?",
    ),
    _sig(
        Code.SHM_TOO_SMALL,
        C,
        ("/dev/shm", "shared memory segment", "bus error", "</torch_"),
        r"(?i)(?:error while creating|failed to (?:extend|create|open)) (?:the )?shared memory"
        r" segment|"
        + in_order("/dev/shm", "no space left|failed|error")
        + "|"
        + in_order("no space left on device|nccl warn|failed|error|unable", "/dev/shm")
        + r"|\bBus error\b|unable to write to file </torch_",
        warning_ok=True,
    ),
    _sig(
        Code.NCCL_ERROR,
        C,
        ("nccl",),
        r"NCCL error|nccl(?:InternalError|UnhandledCudaError|SystemError|InvalidUsage"
        r"|RemoteError|InvalidArgument)|DistBackendError|NCCL WARN|NCCL_ERROR_[A-Z_]+|NcclError",
        warning_ok=True,
    ),
    _sig(
        Code.PORT_IN_USE,
        C,
        (
            "address already in use",
            "errno 98",
            "errno 48",
            "attempting to bind",
            "eaddrinuse",
            "server socket",
        ),
        r"\[Errno (?:98|48|10048)\]|[Aa]ddress already in use|\bEADDRINUSE\b"
        r"|server socket has failed to (?:listen|bind)"
        r"|error while attempting to bind on address \('(?P<host>[^']*)', (?P<port>\d+)\)",
    ),
    _sig(
        Code.TRANSFORMERS_TOO_NEW,
        C,
        ("has no attribute", "cannot import name", "no module named 'transformers"),
        # the object: a whole word holding one of these (looked for once per word: linear)
        r"(?:AttributeError: )?'?(?<!\w)(?=\w*(?:Tokenizer|Config|Processor|Model))"
        r"(?P<object>\w+)'?"
        r"(?: object)? has no attribute '?(?P<attribute>\w+)'?"
        r"|cannot import name '(?P<name>\w+)' from '(?P<module>transformers[\w.]*)'"
        r"|No module named '(?P<missing>transformers\.[\w.]+)'",
    ),
    _sig(
        Code.ENCODER_CACHE_PROFILING,
        Role.STALL,
        ("encoder cache",),
        r"Encoder cache will be initialized with a budget of (?P<budget>\d+) tokens,"
        r" and profiled with (?P<items>\d+) (?P<modality>\w+) items of the maximum feature size",
    ),
    _sig(
        Code.ENGINE_CORE_FAILED,
        W,
        ("failed",),
        r"Engine core initialization failed(?:\. See root cause above\.)?"
        r"(?: Failed core proc\(s\): (?P<procs>\{[^}]*\}))?"
        r"|Frontend process failed during engine core initialization"
        r"|EngineCore failed to start|WorkerProc failed to start|Engine process failed to start"
        r"|Worker failed with error",
    ),
    # past the stall point: the KV cache is sized, graphs are captured
    _sig(
        Code.NONE,
        Role.PROGRESS,
        ("kv cache size", "kv cache memory", "graph captur", "init engine"),
        r"GPU KV cache size|Available KV cache memory|Graph capturing finished"
        r"|# GPU blocks|" + in_order("init engine ", " took"),
    ),
    _sig(
        Code.NONE,
        Role.HEALTHY,
        ("startup complete", "starting vllm"),
        r"Application startup complete|Starting vLLM (?:API )?server",
    ),
)

BY_CODE = {s.code: s for s in SIGNATURES if s.role in (Role.CAUSE, Role.STALL, Role.WRAPPER)}


@dataclass(frozen=True)
class Match:
    signature: Signature
    groups: dict[str, str]

    @property
    def code(self) -> Code:
        return self.signature.code


def match(text: str) -> Match | None:
    """The first signature that reads ``text`` (a normalised line), with its named groups."""
    low = text.lower()
    for sig in SIGNATURES:
        if any(k in low for k in sig.keywords) and (m := sig.pattern.search(text)):
            groups = m.groupdict().items()
            return Match(sig, {k: v for k, v in groups if v is not None and k[0] != "_"})
    return None
