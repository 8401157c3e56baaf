"""The command line: parses, calls the core, hands results to render. Decides nothing.

Exit codes: 0 ok, 1 a check (or resolve, install, build) failed, 2 bad input or
configuration, 130 interrupted. Only :func:`main` ends the process.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click

from . import __version__, process, redaction, render
from .atomicfile import sweep_temporary_folders
from .errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    BadInput,
    EnvkitError,
    Interrupted,
)

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class State:
    envs: str | None = None
    json: bool = False
    broken: int = 0  # broken profiles met by a command about all profiles

    def worst(self, code: int) -> int:
        """A command over every profile ends with exit 2 when some profile was broken,
        after doing its work for the others."""
        return max(code, EXIT_BAD_INPUT) if self.broken else code


def json_option(func: F) -> F:
    def remember(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
        ctx.find_object(State).json = value  # type: ignore[union-attr]
        return value

    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        is_eager=True,
        callback=remember,
        help="Print one JSON document (stable shape) instead of text.",
    )(func)


def venv_option(func: F) -> F:
    return click.option(
        "--venv",
        type=click.Path(path_type=Path),
        default=Path(".venv"),
        show_default=True,
        help="The virtual environment to build or check.",
    )(func)


def constraints_option(func: F) -> F:
    return click.option(
        "--constraints",
        metavar="DIR",
        envvar="ENVKIT_CONSTRAINTS",
        help="Folder of published locks [default: constraints/ beside envs/; "
        "env: ENVKIT_CONSTRAINTS].",
    )(func)


def _checked_torch_index(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Any:
    from .urls import check_torch_index

    return check_torch_index(value)


def _checked_index(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Any:
    from .urls import check_index

    return check_index(value, "--index-url") if value is not None else None


def index_url_option(func: F) -> F:
    """--index-url, as uv's --default-index (scan reads the same index, see wheelfetch)."""
    return click.option(
        "--index-url",
        "index",
        metavar="URL",
        callback=_checked_index,
        help="The package index [default: $UV_DEFAULT_INDEX, $UV_INDEX_URL, else PyPI, as uv].",
    )(func)


def torch_index_option(func: F) -> F:
    return click.option(
        "--torch-index",
        metavar="default|URL",
        envvar="ENVKIT_TORCH_INDEX",
        callback=_checked_torch_index,
        help="Where torch comes from: 'default' takes it from the default index, a URL "
        "uses a PyTorch index mirror ('{backend}' is substituted). Verification still "
        "demands the profile's CUDA. [env: ENVKIT_TORCH_INDEX]",
    )(func)


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="Exit codes:\n\n\b\n" + render.exit_codes_help(),
)
@click.version_option(__version__, prog_name="envkit")
@click.option(
    "--envs",
    metavar="DIR",
    envvar="ENVKIT_ENVS",
    help="Folder of profile files [default: ./envs; env: ENVKIT_ENVS].",
)
@click.pass_obj
def cli(state: State, envs: str | None) -> None:
    """envkit: declarative, verified vLLM environments built with uv."""
    state.envs = envs


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (``sys.exit`` happens only in ``__main__``)."""
    args = list(argv) if argv is not None else sys.argv[1:]
    state = State(json="--json" in args)  # usage errors are JSON too when --json was asked
    redaction.forget_secrets()
    redaction.remember_environment_secrets()
    restore = process.install_signal_handlers()
    sweep_temporary_folders()  # what killed envkit processes left in the temporary folder
    try:
        code = cli.main(args=args, obj=state, standalone_mode=False, prog_name="envkit")
        return int(code) if isinstance(code, int) else EXIT_OK
    except Interrupted as exc:
        render.interrupted(state.json, exc.message)
        return EXIT_INTERRUPTED
    except EnvkitError as exc:
        render.error(exc, state.json)
        return exc.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        render.interrupted(state.json)
        return EXIT_INTERRUPTED
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        render.usage_error(exc.format_message(), state.json)
        return EXIT_BAD_INPUT
    except (RecursionError, MemoryError):
        render.error(
            BadInput(
                "The input is nested too deeply or is too large to read.",
                "Check the files and arguments given; envkit reads model and profile files "
                "of ordinary size.",
            ),
            state.json,
        )
        return EXIT_BAD_INPUT
    except OSError as exc:
        # a file or folder the command needed (read-only, full disk, vanished): one message
        where = f" {exc.filename!r}" if exc.filename else ""
        render.error(
            BadInput(
                f"Cannot access{where}: {exc.strerror or type(exc).__name__}.",
                "Check the path, its permissions and the free space, then run again.",
            ),
            state.json,
        )
        return EXIT_BAD_INPUT
    finally:
        if "envkit.httpclient" in sys.modules:  # loaded only by commands that use the network
            sys.modules["envkit.httpclient"].close_all()
        restore()


def run() -> None:
    sys.exit(main())


# The commands live in one module per concern; importing them registers them on `cli`.
from . import cli_env, cli_locks, cli_models, cli_serving  # noqa: E402, F401
