"""The ``vllm serve`` command a plan recommends, and the docker-compose service running it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Recommendation:
    """The settings to serve with: ``vllm serve`` flags."""

    gpu_memory_utilization: float
    max_model_len: int
    dtype: str
    mm_processor_kwargs: dict[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        if self.mm_processor_kwargs is None:
            del data["mm_processor_kwargs"]
        return data


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
