"""Tiny vLLM wheels whose serve parsers envkit lint reads (sources written for these tests):
0.1.0 builds it with plain add_argument calls, 0.2.0 from config dataclasses (get_kwargs, a
frontend dataclass added in a loop, EnableDisableAction), 0.3.0 in a way envkit cannot read."""

from __future__ import annotations

from wheelhouse import Wheel

OLD_ARGS = """
import argparse

class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--max-model-len", type=int, default=None, help="Context length.")
        parser.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
        parser.add_argument("--enable-reasoning", action="store_true",
                            help="[DEPRECATED] --enable-reasoning is deprecated; use "
                            "--reasoning-parser instead.")
        parser.add_argument("--reasoning-parser", type=str, default=None)
        parser.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction)
        parser.add_argument("--lora-modules", nargs="+", default=None)
        parser.add_argument("--model", type=str, default="m")
        return parser

class AsyncEngineArgs(EngineArgs):
    @staticmethod
    def add_cli_args(parser):
        parser = EngineArgs.add_cli_args(parser)
        parser.add_argument("--disable-log-requests", action="store_true")
        return parser
"""
OLD_FRONTEND = """
def make_arg_parser(parser):
    parser.add_argument("--host", type=str, default=None)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--api-key", type=str, default=None)
    return AsyncEngineArgs.add_cli_args(parser)
"""
SERVE = """
class ServeSubcommand:
    def subparser_init(self, subparsers):
        serve_parser = subparsers.add_parser("serve")
        serve_parser.add_argument("model_tag", type=str, nargs="?")
        return make_arg_parser(serve_parser)
"""
OLD_UTILS = """
class FlexibleArgumentParser(ArgumentParser):
    def parse_args(self, args=None, namespace=None):
        if args and args[0] == "serve" and "--model" in args:
            raise ValueError("With `vllm serve`, you should provide the model as a "
                             "positional argument instead of via the `--model` option.")
        return super().parse_args(args, namespace)
"""
OLD_ENVS = """
environment_variables = {
    "VLLM_OLD_KNOB": lambda: os.getenv("VLLM_OLD_KNOB"),
    "VLLM_LOGGING_LEVEL": lambda: os.getenv("VLLM_LOGGING_LEVEL", "INFO"),
}
"""
NEW_CONFIG = """
from dataclasses import dataclass, field
from typing import Literal

@config
@dataclass
class ModelConfig:
    model: str = "m"
    max_model_len: int | None = None
    enforce_eager: bool = False
    served_model_name: str | list[str] | None = None
    dtype: Literal["auto", "half"] = "auto"

@dataclass
class ParallelConfig:
    tensor_parallel_size: int = 1
    cudagraph_sizes: tuple[int, ...] = ()
    shape: tuple[int, int] = (1, 1)
    mode: bool | str | None = None
"""
NEW_ARGS = """
import argparse
from vllm.config import ModelConfig, ParallelConfig

class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        model_kwargs = get_kwargs(ModelConfig)
        group = parser.add_argument_group("ModelConfig")
        group.add_argument("--model", **model_kwargs["model"])
        group.add_argument("--max-model-len", **model_kwargs["max_model_len"])
        group.add_argument("--enforce-eager", **model_kwargs["enforce_eager"])
        group.add_argument("--served-model-name", **model_kwargs["served_model_name"])
        group.add_argument("--dtype", **model_kwargs["dtype"])
        group.add_argument("--reasoning-parser", type=str)
        parallel_kwargs = get_kwargs(ParallelConfig)
        group.add_argument("--tensor-parallel-size", "-tp",
                           **parallel_kwargs["tensor_parallel_size"])
        group.add_argument("--cudagraph-sizes", **{**parallel_kwargs["cudagraph_sizes"],
                                                    "default": None})
        group.add_argument("--shape", **parallel_kwargs["shape"])
        group.add_argument("--mode", **parallel_kwargs["mode"])
        return parser

class AsyncEngineArgs(EngineArgs):
    @staticmethod
    def add_cli_args(parser, async_args_only=False):
        if not async_args_only:
            parser = EngineArgs.add_cli_args(parser)
        parser.add_argument("--enable-log-requests", action=argparse.BooleanOptionalAction)
        return parser
"""
NEW_FRONTEND = """
from dataclasses import dataclass, field

@dataclass
class BaseFrontendArgs:
    chat_template: str | None = None
    allowed_origins: list[str] = field(default_factory=list)

    @classmethod
    def _customize_cli_kwargs(cls, kwargs):
        del kwargs["allowed_origins"]["nargs"]
        return kwargs

    @classmethod
    def add_cli_args(cls, parser):
        frontend_kwargs = get_kwargs(cls)
        frontend_kwargs = cls._customize_cli_kwargs(frontend_kwargs)
        group = parser.add_argument_group("Frontend")
        for key, value in frontend_kwargs.items():
            extra_flags = value.pop("flags", [])
            group.add_argument(*extra_flags, f"--{key.replace('_', '-')}", **value)
        return parser

@dataclass
class FrontendArgs(BaseFrontendArgs):
    host: str | None = None
    port: int = 8000
    enable_ssl_refresh: bool = False

def make_arg_parser(parser):
    parser.add_argument("model_tag", type=str, nargs="?")
    parser.add_argument("--headless", action="store_true")
    parser = FrontendArgs.add_cli_args(parser)
    return AsyncEngineArgs.add_cli_args(parser)
"""
NEW_SERVE = """
class ServeSubcommand:
    def subparser_init(self, subparsers):
        serve_parser = subparsers.add_parser("serve")
        return make_arg_parser(serve_parser)
"""
NEW_UTILS = """
class EnableDisableAction(BooleanOptionalAction):
    _inverse_prefixes = {"--enable-": "--disable-", "--disable-": "--enable-"}

class FlexibleArgumentParser(ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", BooleanOptionalAction, EnableDisableAction)

    def parse_args(self, args=None, namespace=None):
        if args and args[0] == "serve" and "--model" in args:
            logger.warning("With `vllm serve`, you should provide the model as a "
                           "positional argument instead of via the `--model` option.")
        return super().parse_args(args, namespace)
"""
NEW_ENVS = """
environment_variables: dict = {
    "VLLM_LOGGING_LEVEL": lambda: os.getenv("VLLM_LOGGING_LEVEL", "INFO"),
    "VLLM_NEW_KNOB": lambda: os.getenv("VLLM_NEW_KNOB"),
}
"""
COMPUTED = """
class EngineArgs:
    @staticmethod
    def add_cli_args(parser):
        for name in NAMES:
            parser.add_argument("--" + name)
        return parser
"""


def old(version: str = "0.1.0") -> Wheel:
    return Wheel("vllm", version, {
        "vllm/__init__.py": "",
        "vllm/engine/arg_utils.py": OLD_ARGS,
        "vllm/entrypoints/openai/cli_args.py": OLD_FRONTEND,
        "vllm/entrypoints/cli/serve.py": SERVE,
        "vllm/utils.py": OLD_UTILS,
        "vllm/envs.py": OLD_ENVS,
    })  # fmt: skip


def new(version: str = "0.2.0") -> Wheel:
    return Wheel("vllm", version, {
        "vllm/__init__.py": "",
        "vllm/config/__init__.py": "from vllm.config.model import ModelConfig\n",
        "vllm/config/model.py": NEW_CONFIG,
        "vllm/engine/arg_utils.py": NEW_ARGS,
        "vllm/entrypoints/common/cli_args.py": NEW_FRONTEND,
        "vllm/entrypoints/cli/serve.py": NEW_SERVE,
        "vllm/utils/argparse_utils.py": NEW_UTILS,
        "vllm/envs.py": NEW_ENVS,
    })  # fmt: skip


def unreadable(version: str = "0.3.0") -> Wheel:
    return Wheel("vllm", version, {
        "vllm/__init__.py": "",
        "vllm/engine/arg_utils.py": COMPUTED,
        "vllm/envs.py": NEW_ENVS,
    })  # fmt: skip


def texts(wheel: Wheel) -> dict[str, str]:
    return {k: v for k, v in wheel.files.items() if isinstance(v, str)}


def wheels() -> list[Wheel]:
    return [old("0.1.0"), old("0.1.1"), new("0.2.0"), new("0.2.1"), unreadable("0.3.0")]


def profile(version: str) -> str:
    return f"""description = "lint test profile"
python = ">=3.10"
requirements = ["vllm=={version}"]
"""
