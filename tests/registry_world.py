"""A small published world for the scanner tests: vLLM and transformers wheels carrying
registry sources in each release generation's shape (layouts.py), padded so that reading
them whole would cost megabytes."""

from __future__ import annotations

import os
from pathlib import Path

import layouts

from wheelhouse import Wheel

MODELS = Path(__file__).parent / "fixtures" / "models"  # copied from shared/fixtures/models
REGISTRY = "vllm/model_executor/models/registry.py"
CONFIG = "vllm/transformers_utils/config.py"
CONFIG_AUTO = "transformers/models/auto/configuration_auto.py"


def padding(size: int = 3_000_000) -> bytes:
    return os.urandom(size)  # incompressible: a stand-in for compiled kernels


UPLOADS = {
    "vllm-0.2.7": "2024-01-04T00:00:00Z",
    "vllm-0.8.5": "2025-04-28T23:59:40Z",
    "vllm-0.9.0": "2025-05-15T00:00:00Z",
    "vllm-0.33.0": "2026-11-01T00:00:00Z",
    "transformers-4.51.3": "2025-04-14T00:00:00Z",
    "transformers-5.24.0": "2026-10-20T00:00:00Z",
}


# The shape of vLLM's test registry (tests/models/registry.py in each sdist): an example
# checkpoint per architecture and, for a few, the transformers releases its tests need.
TEST_REGISTRY_085 = """from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class _HfExamplesInfo:
    default: str
    min_transformers_version: Optional[str] = None
    max_transformers_version: Optional[str] = None
    transformers_version_reason: Optional[str] = None


_TEXT_GENERATION_EXAMPLE_MODELS = {
    "LlamaForCausalLM": _HfExamplesInfo("example-org/llama-tiny"),
    "Qwen3ForCausalLM": _HfExamplesInfo("example-org/qwen3-tiny",
                                        min_transformers_version="4.52.dev0",
                                        transformers_version_reason="needs the "
                                        "newer attention code"),
    "Mid000ForCausalLM": _HfExamplesInfo("example-org/mid", min_transformers_version="soon"),
}

_MULTIMODAL_EXAMPLE_MODELS = {
    "MllamaForConditionalGeneration": _HfExamplesInfo("example-org/mllama-tiny",
                                                      max_transformers_version="4.48"),
    "Qwen2VLForConditionalGeneration": _HfExamplesInfo("example-org/qwen2-vl-tiny"),
}

_EXAMPLE_MODELS = {**_TEXT_GENERATION_EXAMPLE_MODELS, **_MULTIMODAL_EXAMPLE_MODELS}
"""


def wheels() -> list[Wheel]:
    return [
        Wheel(
            "vllm",
            "0.2.7",
            {
                "vllm/_C.so": padding(),
                **layouts.vllm_old().files,
            },
            requires=["torch==2.1.2", "transformers>=4.36.0"],
            requires_python=">=3.8",
        ),
        Wheel(
            "vllm",
            "0.8.5",
            {
                "vllm/_C.so": padding(),
                **layouts.vllm_085().files,
            },
            requires=["transformers>=4.51.1", "torch==2.6.0", "tokenizers>=0.21.1"],
            requires_python="<3.13,>=3.9",
            sdist=True,
            sdist_files={"tests/models/registry.py": TEST_REGISTRY_085},
        ),
        # a release whose wheel lacks the registry: scanning it must say so
        Wheel("vllm", "0.9.0", {"vllm/_C.so": padding(100_000)}, requires=["torch==2.7.0"]),
        Wheel(
            "vllm",
            "0.33.0",
            {
                "vllm/_C.so": padding(),
                **layouts.vllm_0330().files,
            },
            requires=["transformers<5.21.0,>=5.16.1", "torch==2.14.0"],
            requires_python="<3.15,>=3.11",
        ),
        Wheel(
            "transformers",
            "4.51.3",
            dict(layouts.transformers_4().files),
            requires=["tokenizers<0.22,>=0.21"],
        ),
        Wheel(
            "transformers",
            "5.24.0",
            dict(layouts.transformers_5().files),
        ),
        # 5.20.2 stands for the release vLLM 0.33.0 allows; same mappings as 5.24.0 here
        Wheel(
            "transformers",
            "5.20.2",
            dict(layouts.transformers_5().files),
        ),
        Wheel("torch", "2.14.0", {"torch/version.py": "cuda: Optional[str] = '13.0'\n"}),
        # vLLM 0.8.5's pin; the PyTorch index (envkit's table) also has 11.8 and 12.6 builds
        Wheel("torch", "2.6.0", {"torch/version.py": "cuda: Optional[str] = '12.4'\n"}),
    ]


def upload_times(folder: Path) -> dict[str, str]:
    out = {}
    for path in folder.glob("*.whl"):
        key = "-".join(path.name.split("-")[:2])
        out[path.name] = UPLOADS.get(key, "2026-10-01T00:00:00Z")
    return out
