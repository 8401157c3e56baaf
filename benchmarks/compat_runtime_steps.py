"""compat_runtime.py's helpers: the model configs it writes, child processes with deadlines,
and the start-up steps run inside a pair's venv (compat_runtime_child.py) read back.

The configs are written here in the shapes checkpoints carry (field names from the shared
fixtures' config.json files and transformers' config classes; sizes small but real): plain
4.x-era files (``torch_dtype``, ``rope_scaling``) for the older model types and a 5.x-era
one (``dtype``, ``rope_parameters``, nested ``text_config``) for qwen3_5.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHILD = Path(__file__).with_name("compat_runtime_child.py")

_TEXT = {
    "hidden_act": "silu",
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_attention_heads": 14,
    "num_hidden_layers": 24,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-06,
    "initializer_range": 0.02,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "vocab_size": 151936,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
}


def _qwen3_5() -> dict[str, Any]:
    layers = ["linear_attention"] * 3 + ["full_attention"]
    text = {
        "model_type": "qwen3_5_text",
        "attention_bias": False,
        "head_dim": 256,
        "hidden_act": "silu",
        "hidden_size": 1024,
        "intermediate_size": 3584,
        "layer_types": layers * 6,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 16,
        "linear_value_head_dim": 128,
        "max_position_embeddings": 32768,
        "num_attention_heads": 8,
        "num_hidden_layers": 24,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06,
        "rope_parameters": {
            "partial_rotary_factor": 0.25,
            "rope_theta": 10000.0,
            "rope_type": "default",
        },
        "vocab_size": 248320,
    }
    vision = {
        "model_type": "qwen3_5_vision",
        "depth": 12,
        "hidden_act": "gelu_pytorch_tanh",
        "hidden_size": 768,
        "in_channels": 3,
        "intermediate_size": 3072,
        "num_heads": 12,
        "num_position_embeddings": 2304,
        "out_hidden_size": 1024,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
    }
    return {
        "architectures": ["Qwen3_5ForConditionalGeneration"],
        "model_type": "qwen3_5",
        "dtype": "bfloat16",
        "image_token_id": 248056,
        "video_token_id": 248057,
        "vision_start_token_id": 248053,
        "vision_end_token_id": 248054,
        "tie_word_embeddings": False,
        "transformers_version": "5.20.2",
        "text_config": text,
        "vision_config": vision,
    }


# model type -> (architecture, config.json). llama and qwen2 are the plain text models
# every release loads: their config load is vLLM's config loader as a whole.
CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "llama": (
        "LlamaForCausalLM",
        {
            **_TEXT,
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "attention_bias": False,
            "mlp_bias": False,
            "head_dim": 64,
            "num_attention_heads": 16,
            "hidden_size": 1024,
            "rope_theta": 500000.0,
            "rope_scaling": {
                "factor": 32.0,
                "high_freq_factor": 4.0,
                "low_freq_factor": 1.0,
                "original_max_position_embeddings": 8192,
                "rope_type": "llama3",
            },
            "vocab_size": 128256,
            "bos_token_id": 128000,
            "eos_token_id": 128009,
            "transformers_version": "4.45.0",
        },
    ),
    "qwen2": (
        "Qwen2ForCausalLM",
        {
            **_TEXT,
            "architectures": ["Qwen2ForCausalLM"],
            "model_type": "qwen2",
            "rope_theta": 1000000.0,
            "sliding_window": 32768,
            "use_sliding_window": False,
            "max_window_layers": 21,
            "attention_dropout": 0.0,
            "transformers_version": "4.43.1",
        },
    ),
    "qwen3": (
        "Qwen3ForCausalLM",
        {
            **_TEXT,
            "architectures": ["Qwen3ForCausalLM"],
            "model_type": "qwen3",
            "head_dim": 128,
            "hidden_size": 1024,
            "intermediate_size": 3072,
            "num_attention_heads": 16,
            "num_hidden_layers": 28,
            "num_key_value_heads": 8,
            "attention_bias": False,
            "rope_theta": 1000000.0,
            "rope_scaling": None,
            "sliding_window": None,
            "use_sliding_window": False,
            "max_window_layers": 28,
            "transformers_version": "4.51.0",
        },
    ),
    "qwen2_vl": (
        "Qwen2VLForConditionalGeneration",
        {
            **_TEXT,
            "architectures": ["Qwen2VLForConditionalGeneration"],
            "model_type": "qwen2_vl",
            "hidden_size": 1536,
            "intermediate_size": 8960,
            "num_attention_heads": 12,
            "num_hidden_layers": 28,
            "max_window_layers": 28,
            "rope_theta": 1000000.0,
            "sliding_window": 32768,
            "use_sliding_window": False,
            "vision_start_token_id": 151652,
            "vision_end_token_id": 151653,
            "vision_token_id": 151654,
            "image_token_id": 151655,
            "video_token_id": 151656,
            "vision_config": {
                "depth": 32,
                "embed_dim": 1280,
                "mlp_ratio": 4,
                "num_heads": 16,
                "in_chans": 3,
                "hidden_size": 1536,
                "patch_size": 14,
                "spatial_merge_size": 2,
                "spatial_patch_size": 14,
                "temporal_patch_size": 2,
            },
            "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
            "transformers_version": "4.41.2",
        },
    ),
    "gemma3": (
        "Gemma3ForConditionalGeneration",
        {
            "architectures": ["Gemma3ForConditionalGeneration"],
            "model_type": "gemma3",
            "boi_token_index": 255999,
            "eoi_token_index": 256000,
            "eos_token_id": [1, 106],
            "image_token_index": 262144,
            "initializer_range": 0.02,
            "mm_tokens_per_image": 256,
            "text_config": {
                "model_type": "gemma3_text",
                "hidden_size": 2560,
                "intermediate_size": 10240,
                "num_hidden_layers": 34,
                "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                "sliding_window": 1024,
            },
            "vision_config": {
                "model_type": "siglip_vision_model",
                "hidden_size": 1152,
                "image_size": 896,
                "intermediate_size": 4304,
                "num_attention_heads": 16,
                "num_hidden_layers": 27,
                "patch_size": 14,
                "vision_use_head": False,
            },
            "torch_dtype": "bfloat16",
            "transformers_version": "4.50.0.dev0",
        },
    ),
    "qwen3_5": ("Qwen3_5ForConditionalGeneration", _qwen3_5()),
    # vLLM's own DbrxConfig (registered for model type dbrx) up to the releases that take
    # transformers' one: its sub-configs' from_pretrained use a 4.x PretrainedConfig helper
    "dbrx": (
        "DbrxForCausalLM",
        {
            "architectures": ["DbrxForCausalLM"],
            "model_type": "dbrx",
            "attn_config": {"clip_qkv": 8, "kv_n_heads": 8, "model_type": "", "rope_theta": 500000},
            "d_model": 6144,
            "emb_pdrop": 0.0,
            "ffn_config": {
                "ffn_hidden_size": 10752,
                "model_type": "",
                "moe_jitter_eps": 0,
                "moe_loss_weight": 0.05,
                "moe_num_experts": 16,
                "moe_top_k": 4,
            },
            "initializer_range": 0.02,
            "max_seq_len": 32768,
            "n_heads": 48,
            "n_layers": 40,
            "output_router_logits": False,
            "resid_pdrop": 0.0,
            "router_aux_loss_coef": 0.05,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
            "use_cache": True,
            "vocab_size": 100352,
            "transformers_version": "4.38.2",
        },
    ),
}
VLLM_WIDE_CONFIGS = ("llama", "qwen2")
# architectures whose class is imported without a config: model files that import
# transformers' own model code (audio towers, omni models, vision processors)
CLASS_ONLY = (
    "Qwen2_5_VLForConditionalGeneration",
    "Qwen2AudioForConditionalGeneration",
    "Qwen2_5OmniThinkerForConditionalGeneration",
    "MiniCPMO",
    "WhisperForConditionalGeneration",
    "LlavaForConditionalGeneration",
    "Llama4ForConditionalGeneration",
    "Gemma3nForConditionalGeneration",
)


def architecture_of(model_type: str) -> str:
    return CONFIGS[model_type][0]


def model_type_of(arch: str) -> str | None:
    return next((t for t, (a, _c) in CONFIGS.items() if a == arch), None)


@dataclass(frozen=True)
class Step:
    name: str  # import-vllm, config-package, tokenizer:KIND, config:TYPE, class:ARCH
    status: str  # ok, error, timeout, not-run
    error_type: str = ""
    message: str = ""
    origin: str = ""  # the innermost vllm/ frame, path:line (where vLLM made the call)
    raised_in: str = ""  # the innermost vllm/ or transformers/ frame, when not the same
    cause: str = ""  # the root of a chained exception, "Type: first line"
    seconds: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def said(self) -> str:
        """One line for a table: ``Type: message (origin)``."""
        if self.ok:
            return "ok"
        text = f"{self.error_type}: {self.message}" if self.message else self.error_type
        return text + (f" ({self.origin})" if self.origin else "")


@dataclass(frozen=True)
class Done:
    code: int | None  # None: killed at the deadline
    seconds: float
    out: str
    err: str


def run(
    cmd: list[str], *, timeout: float, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Done:
    """A child in its own process group: at the deadline the whole group is killed (vLLM
    and uv start children of their own)."""
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env, cwd=cwd, start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        code = None
    return Done(code, round(time.monotonic() - start, 1), out, err)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def child_env(work: Path) -> dict[str, str]:
    """No network, no GPU, caches under the work folder, quiet logs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHON"))}
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HOME=str(work / "hf-home"),
        VLLM_CACHE_ROOT=str(work / "vllm-cache"),
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        VLLM_LOGGING_LEVEL="WARNING",
        TOKENIZERS_PARALLELISM="false",
        CUDA_VISIBLE_DEVICES="",
        OMP_NUM_THREADS="1",
    )
    return env


def run_startup(
    python: Path,
    folder: Path,
    classes: list[str],
    *,
    all_classes: bool,
    step_timeout: int,
    env: dict[str, str],
) -> list[Step]:
    """Every start-up step in ``python`` (a pair's venv). A child that stops answering (a
    hang the alarm cannot interrupt) is killed ``step_timeout`` + 60 s into its step, and one
    that dies (a crash in C code) leaves its step too: that step is recorded as such and a
    new child runs the steps after it (twice at most)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "startup_child.py"
    shutil.copyfile(CHILD, script)
    configs = {t: {"architecture": a, "config": c} for t, (a, c) in CONFIGS.items()}
    done: dict[str, Step] = {}
    limit = step_timeout + 60
    for attempt in range(3):
        spec = {
            "folder": str(folder / "fixtures"),
            "configs": configs,
            "classes": classes,
            "all_classes": all_classes,  # and then every other architecture of the registry
            "timeout": step_timeout,
            "skip": sorted(done),
        }
        (folder / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        out = folder / f"steps-{attempt}.jsonl"
        cmd = [str(python), str(script), str(folder / "spec.json"), str(out)]
        code, stuck = _watch(cmd, out, limit, env, folder / f"child-{attempt}.log")
        done.update({s.name: s for s in _read_steps(out)})
        if stuck is None:
            break
        if code is None:
            done[stuck] = Step(stuck, "timeout", "timeout", f"killed after {limit} s")
        else:
            done[stuck] = Step(stuck, "error", "crash", f"the child died with exit code {code}")
    return list(done.values())


def _watch(
    cmd: list[str], out: Path, limit: float, env: dict[str, str], log: Path
) -> tuple[int | None, str | None]:
    """Run the child, killing it when one step runs past ``limit`` seconds. Returns its exit
    code (None: killed) and the step it was in when it stopped (None: it finished)."""
    with log.open("w", encoding="utf-8") as sink:
        proc = subprocess.Popen(
            cmd, stdout=sink, stderr=subprocess.STDOUT, text=True, env=env,
            start_new_session=True,
        )  # fmt: skip
        current, since = None, time.monotonic()
        while proc.poll() is None:
            time.sleep(1)
            current, since = _current(_records(out), current, since)
            if current and time.monotonic() - since > limit:
                _kill_group(proc)
                proc.wait()
                return None, current
    records = _records(out)
    if records and records[-1].get("event") == "done":
        return proc.returncode, None
    last = records[-1] if records else {}
    started = str(last.get("step", "import-vllm")) if last.get("event") == "start" else None
    return proc.returncode, started


def _current(
    records: list[dict[str, Any]], current: str | None, since: float
) -> tuple[str | None, float]:
    last = records[-1] if records else None
    if last and last.get("event") == "start" and last["step"] != current:
        return str(last["step"]), time.monotonic()
    if last and last.get("event") == "end":
        return None, since
    return current, since


def _records(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            break  # a line being written
    return out


def _read_steps(path: Path) -> list[Step]:
    steps = []
    for r in _records(path):
        if r.get("event") != "end":
            continue
        steps.append(
            Step(
                name=str(r["step"]),
                status=str(r["status"]),
                error_type=str(r.get("error_type", "")),
                message=str(r.get("message", "")),
                origin=str(r.get("origin", "")),
                raised_in=str(r.get("raised_in", "")),
                cause=str(r.get("cause", "")),
                seconds=float(r.get("seconds", 0.0)),
                detail=dict(r.get("detail") or {}),
            )
        )
    return steps
