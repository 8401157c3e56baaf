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

from . import __version__, process, render
from .build import BuildOptions
from .build import build as run_build
from .catalog import envs_dir, list_profiles, resolve_profile
from .errors import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_INTERRUPTED, EXIT_OK, EnvkitError
from .venvslot import VenvSlot
from .verify import verify as run_verify

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class State:
    envs: str | None = None
    json: bool = False


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


@cli.command()
@json_option
@click.pass_obj
def profiles(state: State, as_json: bool) -> int:
    """List the profiles in the profiles folder."""
    listing = list_profiles(envs_dir(state.envs))
    render.profiles(listing, as_json)
    return EXIT_BAD_INPUT if listing.errors else EXIT_OK


@cli.command()
@click.argument("profile")
@json_option
@click.pass_obj
def show(state: State, profile: str, as_json: bool) -> int:
    """Show one profile: pins, torch backend, checks, supported models."""
    render.show(resolve_profile(profile, envs_dir(state.envs)), as_json)
    return EXIT_OK


@cli.command()
@click.argument("profile")
@venv_option
@click.option(
    "--python",
    "python",
    metavar="PATH_OR_VERSION",
    help="Interpreter to build with: a path, or a version that must also fit the profile.",
)
@click.option(
    "--torch-backend",
    metavar="NAME",
    help="Override the profile's torch backend (cpu, cu124, ...); verification then "
    "demands that backend's CUDA.",
)
@click.option(
    "--torch-index",
    metavar="default|URL",
    envvar="ENVKIT_TORCH_INDEX",
    help="Where torch comes from: 'default' takes it from the default index, a URL "
    "uses a PyTorch index mirror ('{backend}' is substituted). Verification still "
    "demands the profile's CUDA. [env: ENVKIT_TORCH_INDEX]",
)
@click.option("--index-url", metavar="URL", help="The default package index for uv.")
@json_option
@click.pass_obj
def build(
    state: State,
    profile: str,
    venv: Path,
    python: str | None,
    torch_backend: str | None,
    torch_index: str | None,
    index_url: str | None,
    as_json: bool,
) -> int:
    """Recreate the venv from PROFILE with uv, verify it, then swap it in.

    The new environment is built aside and verified; only then does it replace the one at
    --venv. A failed, interrupted or killed build leaves the previous environment in place.
    """
    loaded = resolve_profile(profile, envs_dir(state.envs))
    options = BuildOptions(
        venv=venv,
        python=python,
        torch_backend=torch_backend,
        torch_index=torch_index,
        index_url=index_url,
        stream=not as_json and sys.stderr.isatty(),
    )
    result = run_build(loaded, options, progress=render.progress)
    render.build(result, as_json)
    return EXIT_OK if result.ok else EXIT_CHECK_FAILED


@cli.command()
@click.argument("profile")
@venv_option
@json_option
@click.pass_obj
def verify(state: State, profile: str, venv: Path, as_json: bool) -> int:
    """Check an existing venv against PROFILE: versions, imports, probes, torch CUDA."""
    loaded = resolve_profile(profile, envs_dir(state.envs))
    slot = VenvSlot(venv)
    with slot.locked(render.progress) as recovered:
        for note in recovered:
            render.progress(f"recovered: {note}")
        report = run_verify(loaded, slot.venv)
    render.report(report, as_json)
    return EXIT_OK if report.ok else EXIT_CHECK_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (``sys.exit`` happens only in ``__main__``)."""
    state = State()
    restore = process.install_signal_handlers()
    try:
        code = cli.main(
            args=list(argv) if argv is not None else None,
            obj=state,
            standalone_mode=False,
            prog_name="envkit",
        )
        return int(code) if isinstance(code, int) else EXIT_OK
    except EnvkitError as exc:
        render.error(exc, state.json)
        return exc.exit_code
    except click.exceptions.Abort:
        render.interrupted(state.json)
        return EXIT_INTERRUPTED
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        render.interrupted(state.json)
        return EXIT_INTERRUPTED
    finally:
        restore()


def run() -> None:
    sys.exit(main())
