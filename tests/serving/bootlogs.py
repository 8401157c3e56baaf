"""Small boot logs in the shapes vLLM, torch, CUDA, NCCL, transformers and huggingface_hub
print, written for these tests (never copied from a real log): a preamble, noise, the
failure's own lines, the engine's wrapper, in any of the prefixes a log can carry."""

from __future__ import annotations

ESC = "\x1b"
HEADER = "{level} 05-12 10:01:{second:02d} [{file}:{line}] "
NOISE = (
    "INFO 05-12 10:01:00 [__init__.py:239] Automatically detected platform cuda.",
    "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.02it/s]\r"
    "Loading safetensors checkpoint shards: 100% Completed | 2/2 [00:02<00:00,  1.01it/s]",
    'INFO:     127.0.0.1:51234 - "GET /v1/models HTTP/1.1" 200 OK',
    "INFO 05-12 10:01:03 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s",
    "INFO 05-12 10:01:03 [gpu_model_runner.py:1329] Starting to load model /models/m...",
)
WRAPPER = (
    "ERROR 05-12 10:01:09 [core.py:396] EngineCore failed to start.",
    "ERROR 05-12 10:01:09 [core.py:396] Traceback (most recent call last):",
    'ERROR 05-12 10:01:09 [core.py:396]   File "/usr/lib/python3.12/site-packages/vllm/v1/'
    'engine/core.py", line 387, in run_engine_core',
)
TAIL = (
    "Traceback (most recent call last):",
    '  File "/usr/local/bin/vllm", line 8, in <module>',
    "RuntimeError: Engine core initialization failed. See root cause above. "
    "Failed core proc(s): {}",
)


def preamble(version: str = "0.8.5", model: str = "/models/m") -> list[str]:
    return [
        f"INFO 05-12 10:01:01 [api_server.py:1043] vLLM API server version {version}",
        f"INFO 05-12 10:01:01 [api_server.py:1044] args: Namespace(subparser='serve', "
        f"model_tag='{model}', host=None, port=8000, dtype='auto', max_model_len=4096)",
    ]


def log(
    body: list[str] | tuple[str, ...],
    *,
    version: str = "0.8.5",
    model: str = "/models/m",
    wrap: bool = True,
    prefix: str = "",
) -> str:
    """A whole log: preamble, noise, ``body``, the wrapper; ``prefix`` before every line
    (``compose``: ``vllm-1  | ``, ``engine``: a coloured process prefix on the body)."""
    lines = [*preamble(version, model), *NOISE, *WRAPPER[:1], *body]
    if wrap:
        lines += [*WRAPPER[1:], *TAIL]
    if prefix == "compose":
        lines = [f"vllm-1  | {line}" for line in lines]
    elif prefix == "engine":
        lines = [f"{ESC}[36m(EngineCore_DP0 pid=4242){ESC}[0m {line}" for line in lines]
    elif prefix == "worker":
        lines = [f"(VllmWorker rank=0 pid=77) {line}" for line in lines]
    return "\n".join(lines) + "\n"


# One failure per code: the lines each prints (tracebacks cut to their telling lines).
FAILURES: dict[str, list[str]] = {
    "transformers-too-new": [
        '  File "/venv/lib/python3.12/site-packages/vllm/transformers_utils/tokenizer.py", line 84',
        "AttributeError: Qwen2Tokenizer has no attribute all_special_tokens_extended",
    ],
    "model-type-unknown": [
        "ValueError: The checkpoint you are trying to load has model type `qwen3_5` but "
        "Transformers does not recognize this architecture. This could be because of an "
        "issue with the checkpoint, or because your version of Transformers is out of date.",
    ],
    "architecture-unsupported": [
        "ValueError: Model architectures ['Qwen3_5ForConditionalGeneration'] are not supported "
        "for now. Supported architectures: dict_keys(['AquilaModel', 'LlamaForCausalLM'])",
    ],
    "uva-unavailable": [
        "WARNING 05-12 10:01:04 [interface.py:314] Using 'pin_memory=False' as WSL is "
        "detected. This may slow down the performance.",
        "RuntimeError: UVA is not available",
    ],
    "free-memory-below-utilization": [
        "ValueError: Free memory on device (6.98/8.0 GiB) on startup is less than desired GPU "
        "memory utilization (0.9, 7.2 GiB). Decrease GPU memory utilization or reduce GPU "
        "memory used by other processes.",
    ],
    "kv-cache-too-small": [
        "ValueError: To serve at least one request with the models's max seq len (32768), "
        "(3.50 GiB KV cache is needed, which is larger than the available KV cache memory "
        "(0.84 GiB). Based on the available memory, the estimated maximum model length is "
        "7840. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
        "initializing the engine.",
    ],
    "cuda-oom": [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.20 GiB. GPU 0 has a "
        "total capacity of 7.79 GiB of which 512.00 MiB is free. Including non-PyTorch "
        "memory, this process has 7.28 GiB memory in use.",
    ],
    "xet-unauthorized": [
        "RuntimeError: Data processing error: CAS service error : Reqwest Error: HTTP status "
        "client error (401 Unauthorized), domain: https://cas-server.xethub.hf.co/"
        "reconstruction/0a1b2c",
    ],
    "hf-unauthorized": [
        "huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-abc)",
        "Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-3.1-8B/"
        "resolve/main/config.json.",
    ],
    "undefined-symbol": [
        "ImportError: /venv/lib/python3.12/site-packages/vllm/_C.abi3.so: undefined symbol: "
        "_ZN3c106detail14torchCheckFailEPKcS2_jRKSs",
    ],
    "cuda-runtime-missing": [
        "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",
    ],
    "driver-too-old": [
        "/venv/lib/python3.12/site-packages/torch/cuda/__init__.py:180: UserWarning: CUDA "
        "initialization: The NVIDIA driver on your system is too old (found version 12020). "
        "Please update your GPU driver.",
        "RuntimeError: No CUDA GPUs are available",
    ],
    "no-kernel-image": [
        "torch.AcceleratorError: CUDA error: no kernel image is available for execution on "
        "the device",
    ],
    "bf16-unsupported": [
        "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least "
        "8.0. Your Tesla T4 GPU has compute capability 7.5. You can use float16 instead by "
        "explicitly setting the `dtype` flag in CLI, for example: --dtype=half.",
    ],
    "shm-too-small": [
        "node1:77:77 [0] NCCL INFO Bootstrap : Using eth0:172.17.0.2<0>",
        "node1:77:91 [0] include/shm.h:28 NCCL WARN Error while creating shared memory "
        "segment /dev/shm/nccl-Ab12Cd (size 9637888)",
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
    ],
    "nccl-error": [
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
        "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
    ],
    "fabric-manager": [
        "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda "
        "functions before calling NumCudaDevices() that might have already set an error? "
        "Error 802: system not yet initialized",
    ],
    "cuda-forward-compat": [
        "RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 804: forward "
        "compatibility was attempted on non supported HW",
    ],
    "flashinfer-mismatch": [
        "WARNING 05-12 10:01:05 [flashinfer.py:143] FlashInfer's precompiled kernels are "
        "missing or do not match flashinfer-python 0.6.1 (flashinfer-cubin 0.5.3).",
        "ImportError: flashinfer-cubin version (0.5.3) does not match flashinfer version (0.6.1)",
    ],
    "remote-code-transformers": [
        '  File "/root/.cache/huggingface/modules/transformers_modules/m/modeling_m.py", '
        "line 12, in <module>",
        "ImportError: cannot import name 'is_flash_attn_greater_or_equal_2_10' from "
        "'transformers.utils'",
    ],
    "spawn-main-guard": [
        "RuntimeError: ",
        "        An attempt has been made to start a new process before the",
        "        current process has finished its bootstrapping phase.",
    ],
    "port-in-use": [
        "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): "
        "address already in use",
    ],
    "ptx-toolchain": [
        "torch.AcceleratorError: CUDA error: the provided PTX was compiled with an "
        "unsupported toolchain.",
    ],
    "flashinfer-jit": [
        "INFO 05-12 10:01:06 [flashinfer.py:1] Building FlashInfer kernels for sm_89",
        "RuntimeError: Ninja is required to load C++ extensions (pip install ninja to get it)",
    ],
    "xet-transfer": [
        "RuntimeError: Data processing error: CAS service error : Reqwest Middleware Error: "
        "Request failed after 5 retries",
    ],
    "config-conflict": [
        "ValueError: Found conflicts between 'rope_type=default' (modern field) and "
        "'type=mrope' (legacy field). You should only specify one of them.",
    ],
    "remote-code-prompt": [
        "The repository /models/m contains custom code which must be executed to correctly "
        "load the model. You can inspect the repository content at /models/m.",
        "Do you wish to run the custom code? [y/N] ",
    ],
    "host-oom": [
        "Killed",
    ],
}
