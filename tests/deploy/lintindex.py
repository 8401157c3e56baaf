"""The deploy tests' index (test_export uses its fixtures): envkit lint reads the profile's
vLLM (0.8.5) serve parser from its wheel, so every exported file's flags are checked for real
against a tiny vLLM 0.8.5 wheel on 127.0.0.1 whose parser (written here, in vLLM 0.8.5's
add_argument style) defines the flags the engines' files use."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import indexserver
import lint_world
from wheelhouse import Wheel

ARGS = """
import argparse

class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--max-model-len", type=int, default=None)
        parser.add_argument("--tensor-parallel-size", type=int, default=1)
        parser.add_argument("--pipeline-parallel-size", type=int, default=1)
        parser.add_argument("--gpu-memory-utilization", type=float, default=0.9)
        parser.add_argument("--dtype", type=str, default="auto")
        parser.add_argument("--kv-cache-dtype", type=str, default="auto")
        parser.add_argument("--served-model-name", nargs="+", default=None)
        parser.add_argument("--distributed-executor-backend", type=str, default=None)
        parser.add_argument("--limit-mm-per-prompt", type=str, default=None)
        parser.add_argument("--mm-processor-kwargs", type=str, default=None)
        parser.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction)
        parser.add_argument("--model", type=str, default="m")
        return parser

class AsyncEngineArgs(EngineArgs):
    @staticmethod
    def add_cli_args(parser):
        return EngineArgs.add_cli_args(parser)
"""
ENVS = """
environment_variables = {
    "VLLM_LOGGING_LEVEL": lambda: os.getenv("VLLM_LOGGING_LEVEL", "INFO"),
}
"""


def vllm_085() -> Wheel:
    return Wheel("vllm", "0.8.5", {
        "vllm/__init__.py": "",
        "vllm/engine/arg_utils.py": ARGS,
        "vllm/entrypoints/openai/cli_args.py": lint_world.OLD_FRONTEND,
        "vllm/entrypoints/cli/serve.py": lint_world.SERVE,
        "vllm/utils.py": lint_world.OLD_UTILS,
        "vllm/envs.py": ENVS,
    })  # fmt: skip


@pytest.fixture(scope="session")
def lint_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder: Path = tmp_path_factory.mktemp("deploy-lint-index")
    vllm_085().write(folder)
    with indexserver.serve(folder) as server:
        yield indexserver.url(server)


@pytest.fixture(autouse=True)
def lint_reads_the_local_index(lint_index: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UV_DEFAULT_INDEX", lint_index)
