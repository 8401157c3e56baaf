"""A small published world for envkit upgrade (sources written for these tests): vLLM 0.17.1
and 0.18.0 with the same model registry and the old serve parser (CUDA 12 builds: the shipped
kernel table has kernels for 7.0 in both), and 0.33.0 (a CUDA 13 release: no 7.0) whose
registry drops Phi3Small, Mllama and the Mid fillers and whose parser lacks
--enable-reasoning and whose envs.py no longer reads VLLM_OLD_KNOB, and which asks
tokenizers>=0.22 (the profile pins 0.21.0); transformers 4.57.6 and
5.20.2, torch 2.10.0 (CUDA 12.8) and 2.14.0 (CUDA 13.0). Every wheel also installs, so uv
locks against the same index."""

from __future__ import annotations

from pathlib import Path

import layouts

import lint_world
from wheelhouse import Wheel

UPLOADS = {
    "vllm-0.17.1": "2026-03-11T00:00:00Z",
    "vllm-0.18.0": "2026-04-01T00:00:00Z",
    "vllm-0.33.0": "2026-11-01T00:00:00Z",
    "transformers-4.57.6": "2026-01-10T00:00:00Z",
    "transformers-5.20.2": "2026-10-20T00:00:00Z",
}
OLD_PARSER = {
    "vllm/engine/arg_utils.py": lint_world.OLD_ARGS,
    "vllm/entrypoints/openai/cli_args.py": lint_world.OLD_FRONTEND,
    "vllm/entrypoints/cli/serve.py": lint_world.SERVE,
    "vllm/utils.py": lint_world.OLD_UTILS,
    "vllm/envs.py": lint_world.OLD_ENVS,
}
NEW_PARSER = {
    "vllm/config/__init__.py": "from vllm.config.model import ModelConfig\n",
    "vllm/config/model.py": lint_world.NEW_CONFIG,
    "vllm/engine/arg_utils.py": lint_world.NEW_ARGS,
    "vllm/entrypoints/common/cli_args.py": lint_world.NEW_FRONTEND,
    "vllm/entrypoints/cli/serve.py": lint_world.NEW_SERVE,
    "vllm/utils/argparse_utils.py": lint_world.NEW_UTILS,
    "vllm/envs.py": lint_world.NEW_ENVS,
}


def _vllm(version: str, registry: dict[str, str], parser: dict[str, str], torch: str,
          transformers: str, python: str, *more: str) -> Wheel:  # fmt: skip
    return Wheel(
        "vllm",
        version,
        {
            "vllm/__init__.py": f"__version__ = {version!r}\n",
            "vllm/cli.py": "def main():\n    print('vllm')\n",
            **registry,
            **parser,
        },
        requires=[f"torch=={torch}", f"transformers{transformers}", *more],
        scripts={"vllm": "vllm.cli:main"},
        requires_python=python,
    )


def _transformers(version: str, files: dict[str, str]) -> Wheel:
    return Wheel(
        "transformers",
        version,
        {"transformers/__init__.py": f"__version__ = {version!r}\n", **files},
    )


def _torch(version: str, cuda: str) -> Wheel:
    return Wheel("torch", version, {
        "torch/__init__.py": f"__version__ = {version!r}\n",
        "torch/version.py": f"cuda = {cuda!r}\n",
    })  # fmt: skip


def wheels() -> list[Wheel]:
    old = layouts.vllm_085().files
    new = layouts.vllm_0330().files
    return [
        _vllm("0.17.1", old, OLD_PARSER, "2.10.0", ">=4.56.0,<5", ">=3.10"),
        _vllm("0.18.0", old, OLD_PARSER, "2.10.0", ">=4.56.0,<5", ">=3.10"),
        _vllm(
            "0.33.0",
            new,
            NEW_PARSER,
            "2.14.0",
            "<5.21.0,>=5.16.1",
            "<3.15,>=3.11",
            "tokenizers>=0.22",
        ),
        Wheel("tokenizers", "0.21.0", {"tokenizers/__init__.py": ""}),
        Wheel("tokenizers", "0.22.0", {"tokenizers/__init__.py": ""}),
        _transformers("4.57.6", layouts.transformers_4().files),
        _transformers("5.20.2", layouts.transformers_5().files),
        _torch("2.10.0", "12.8"),
        _torch("2.14.0", "13.0"),
    ]


def upload_times(folder: Path) -> dict[str, str]:
    return {
        p.name: UPLOADS.get("-".join(p.name.split("-")[:2]), "2026-01-01T00:00:00Z")
        for p in folder.glob("*.whl")
    }


PROFILE = """#:schema ../src/envkit/schemas/profile.schema.json
# The team's Qwen line: reviewed by hand.
description = "upgrade test profile"
python = ">=3.11,<3.13"
requirements = ["vllm==0.17.1"]
constraints = [
    "transformers==4.57.6",  # the newest before vLLM 0.17.1
    "torch==2.10.0",
    "tokenizers==0.21.0",  # what our tokenizer files were made with
]

[torch]
backend = "cu128" # the default build of torch 2.10.0
cuda = "12.8"

[matrix]
python = ["3.12"]
platforms = ["linux-x86_64"]
backends = ["cu128"]

[serve]
args = ["example-org/llama-tiny", "--max-model-len", "8192", "--enable-reasoning"]
env = { VLLM_OLD_KNOB = "1", VLLM_LOGGING_LEVEL = "INFO" }
"""
