"""The ``vllm serve`` command a plan recommends (its compose service: ``serving.compose``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from envkit.io.escaping import shell_command


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
    """The ``vllm serve`` line, each word quoted for a shell (``shlex.quote``)."""
    return shell_command(["vllm", "serve", model, *serve_args(rec, kv_cache_dtype)])
