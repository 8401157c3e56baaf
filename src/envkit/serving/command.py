"""The ``vllm serve`` command a plan recommends (its compose service: ``serving.run.compose``),
and the two multimodal values it carries, parsed where they enter (``cli.options``):

- ``--limit-mm-per-prompt``: items per prompt for each modality. Every vLLM takes a JSON
  object of counts (``{"image": 2}``, vLLM 0.8.5's, 0.9.2's and 0.17.1's arg parsers:
  ``json.loads``); vLLM before 0.10 also took ``image=2,video=1``, which 0.10 and later
  refuse, so the command always says it in JSON. 0 turns a modality off (no encoder
  profiling for it). vLLM 0.17.1's objects with dummy sizes (``{"image": {"count": 2,
  "width": 512}}``) are not planned for: envkit counts items.
- ``--mm-processor-kwargs``: the processor's overrides, a JSON object; ``max_pixels`` is the
  image size vLLM profiles with.

Every word of a command goes through :func:`envkit.io.escaping.shell_command`, so a line
printed here is pasted into a shell as the argv it shows.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from envkit.errors import BadInput
from envkit.io.escaping import shell_command

MAX_TEXT = 4096  # characters of an option's JSON: a few keys, never a document
MAX_ITEMS = 100_000  # items of one modality per prompt (vLLM's default is 999)
MAX_PIXELS = 2**40  # a bound on pixel counts, far above any processor's
_MODALITY = re.compile(r"[a-z][a-z0-9_]{0,31}")
_KEY_VALUE = re.compile(r"[a-z][a-z0-9_]{0,31}=[0-9]{1,6}(?:,[a-z][a-z0-9_]{0,31}=[0-9]{1,6})*")
KEY_VALUE_UNTIL = (0, 10)  # vLLM 0.10 and later refuse image=2 (JSON only)


def _shown(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def _json_object(text: str, option: str, example: str) -> dict[str, Any]:
    if len(text) > MAX_TEXT:
        raise BadInput(f"{option} is {len(text)} characters; envkit reads at most {MAX_TEXT}.")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, dict):
        raise BadInput(
            f"{option} {_shown(text)!r} is not a JSON object.",
            f"Write it as vLLM takes it, quoted for the shell: {option} '{example}'.",
        )
    return data


@dataclass(frozen=True)
class MmLimits:
    """``--limit-mm-per-prompt``: items per prompt by modality, in the order given."""

    counts: tuple[tuple[str, int], ...]
    key_value: bool = False  # written image=2 (vLLM before 0.10 only), not JSON

    @classmethod
    def parse(cls, text: str) -> MmLimits:
        """``{"image": 2, "video": 0}`` or ``image=2,video=0``; BadInput naming the option."""
        option, example = "--limit-mm-per-prompt", '{"image": 2}'
        stripped = text.strip()
        if len(stripped) <= MAX_TEXT and _KEY_VALUE.fullmatch(stripped):
            pairs = [part.split("=") for part in stripped.split(",")]
            data: dict[str, Any] = {}
            for key, count in pairs:
                if key in data and data[key] != int(count):
                    raise BadInput(f"{option} gives {key} twice: {_shown(text)!r}.")
                data[key] = int(count)
            key_value = True
        else:
            data, key_value = _json_object(stripped, option, example), False
        counts = []
        for key, count in data.items():
            if not _MODALITY.fullmatch(key):
                raise BadInput(
                    f"{option}: {_shown(key)!r} is not a modality (image, video, audio)."
                )
            if isinstance(count, dict):
                raise BadInput(
                    f"{option}: {key} is given as an object; envkit plans with item counts.",
                    f"Give the count ({option} '{{\"{key}\": 2}}') and the image size with "
                    "--mm-processor-kwargs '{\"max_pixels\": 524288}'.",
                )
            if isinstance(count, bool) or not isinstance(count, int):
                raise BadInput(f"{option}: {key} must be a whole number of items, not {count!r}.")
            if not 0 <= count <= MAX_ITEMS:
                raise BadInput(f"{option}: {key} {count} is out of range (0 to {MAX_ITEMS}).")
            counts.append((key, count))
        return cls(tuple(counts), key_value)

    def get(self, modality: str) -> int | None:
        return next((n for key, n in self.counts if key == modality), None)

    def to_dict(self) -> dict[str, int]:
        return dict(self.counts)

    def flag(self) -> str:
        """The value as every vLLM takes it: JSON."""
        return json.dumps(self.to_dict())


@dataclass(frozen=True)
class MmKwargs:
    """``--mm-processor-kwargs``: a JSON object of plain values (kept in its order)."""

    items: tuple[tuple[str, Any], ...]

    @classmethod
    def parse(cls, text: str) -> MmKwargs:
        option = "--mm-processor-kwargs"
        data = _json_object(text.strip(), option, '{"max_pixels": 524288}')
        for key, value in data.items():
            if (
                not isinstance(value, (str, int, float, bool))
                or value != value
                or value
                in (
                    float("inf"),
                    float("-inf"),
                )
            ):
                raise BadInput(f"{option}: {_shown(key)!r} must be a number, string or boolean.")
            if key in ("max_pixels", "min_pixels") and (
                isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_PIXELS
            ):
                raise BadInput(
                    f"{option}: {key} {_shown(str(value))!r} must be a whole number of pixels "
                    "above 0, e.g. 524288 (512 x 1024)."
                )
        return cls(tuple(data.items()))

    @property
    def max_pixels(self) -> int | None:
        value = dict(self.items).get("max_pixels")
        return value if isinstance(value, int) else None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.items)


@dataclass(frozen=True, kw_only=True)
class Recommendation:
    """The settings to serve with: ``vllm serve`` flags."""

    gpu_memory_utilization: float
    max_model_len: int
    dtype: str
    mm_processor_kwargs: dict[str, Any] | None = None
    limit_mm_per_prompt: dict[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        for optional in ("mm_processor_kwargs", "limit_mm_per_prompt"):
            if data[optional] is None:
                del data[optional]
        return data


def serve_args(rec: Recommendation, kv_cache_dtype: str = "auto") -> list[str]:
    """The recommended settings as vllm serve flags (JSON values as vLLM parses them)."""
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
    if rec.limit_mm_per_prompt is not None:
        args += ["--limit-mm-per-prompt", json.dumps(rec.limit_mm_per_prompt)]
    if rec.mm_processor_kwargs is not None:
        args += ["--mm-processor-kwargs", json.dumps(rec.mm_processor_kwargs)]
    return args


def serve_command(model: str, rec: Recommendation, kv_cache_dtype: str = "auto") -> str:
    """The ``vllm serve`` line, each word quoted for a shell (``shlex.quote``)."""
    return shell_command(["vllm", "serve", model, *serve_args(rec, kv_cache_dtype)])


def shell_words(args: list[str]) -> str:
    """Flags as a shell reads them back (each word quoted): for lines that show arguments."""
    return shell_command(args)


def safe_utilization(free: float, total: float) -> float:
    """The highest ``--gpu-memory-utilization`` that starts: one point below the free
    fraction, down to two decimals (the CUDA context and other processes take a little more
    once vLLM starts; field report 2: 6.98 of 8 GiB free -> 0.86). Shared by plan and
    explain (which loads no memory plan for it)."""
    return max(0.0, math.floor((free / total - 0.01) * 100) / 100)
