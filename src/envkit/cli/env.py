"""CLI commands for environments: profiles, show, build, verify."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from envkit import render
from envkit.cli.options import (
    State,
    compat_lookup,
    complete_profiles,
    constraints_option,
    gpu_choice,
    gpu_target_options,
    index_url_option,
    json_option,
    torch_index_option,
    venv_option,
)
from envkit.errors import EXIT_BAD_INPUT, EXIT_CHECK_FAILED, EXIT_OK
from envkit.profiles.catalog import Catalog

if TYPE_CHECKING:
    from envkit.lock.torchsource import TorchIndex

# Core modules are imported inside the commands that use them: each command loads only its own.


@click.command()
@json_option
@click.pass_obj
def profiles(state: State, as_json: bool) -> int:
    """List the profiles in the profiles folder."""
    listing = Catalog.from_option(state.envs).list()
    render.profiles(listing, as_json)
    return EXIT_BAD_INPUT if listing.errors else EXIT_OK


@click.command()
@click.argument("profile", shell_complete=complete_profiles)
@json_option
@click.pass_obj
def show(state: State, profile: str, as_json: bool) -> int:
    """Show one profile: pins, torch backend, the driver it needs, checks, supported models."""
    from envkit.gpu.needs import for_profile, profile_summary

    found = Catalog.from_option(state.envs).resolve(profile)
    render.show(found, for_profile(found), profile_summary(found), as_json)
    return EXIT_OK


@click.command()
@click.argument("profile", shell_complete=complete_profiles)
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
@torch_index_option
@index_url_option
@click.option(
    "--no-lock",
    is_flag=True,
    help="Resolve afresh even when a lock of this machine's cell is published.",
)
@constraints_option
@gpu_target_options
@json_option
@click.pass_obj
def build(
    state: State,
    /,
    profile: str,
    venv: Path,
    python: str | None,
    torch_backend: str | None,
    torch_index: TorchIndex,
    index: str | None,
    no_lock: bool,
    constraints: str | None,
    as_json: bool,
    **target: Any,
) -> int:
    """Recreate the venv from PROFILE with uv, verify it, then swap it in.

    The new environment is built aside and verified; only then does it replace the one at
    --venv. A failed, interrupted or killed build leaves the previous environment in place.
    The compiled modules must have kernels for the GPU (--gpu, --compute-capability, else
    nvidia-smi's) and link against the torch beside them.
    """
    from envkit.env.build import BuildOptions
    from envkit.env.build import build as run_build

    loaded = Catalog.from_option(state.envs).resolve(profile)
    chosen = gpu_choice(target)
    options = BuildOptions(
        venv=venv,
        python=python,
        torch_backend=torch_backend,
        torch_index=torch_index,
        index_url=index,
        stream=not as_json and sys.stderr.isatty(),
        use_lock=not no_lock,
        constraints=constraints,
        compat=compat_lookup(index),
        gpu=chosen,
    )
    result = run_build(loaded, options, progress=render.progress, note=render.note)
    render.build(result, as_json)
    return EXIT_OK if result.ok else EXIT_CHECK_FAILED


@click.command()
@click.argument("profile", shell_complete=complete_profiles)
@venv_option
@gpu_target_options
@json_option
@click.pass_obj
def verify(state: State, /, profile: str, venv: Path, as_json: bool, **target: Any) -> int:
    """Check an existing venv against PROFILE: versions, imports, probes, torch CUDA, and
    the GPU layer: kernels for the GPU (--gpu, --compute-capability, else nvidia-smi's; with
    none, which GPUs it runs on), torch symbols, CUDA libraries, the driver."""
    from envkit.env.verify import verify_existing

    loaded = Catalog.from_option(state.envs).resolve(profile)
    chosen = gpu_choice(target)
    report = verify_existing(
        loaded, venv, compat=compat_lookup(None), gpu=chosen, progress=render.progress,
        note=render.note,
    )  # fmt: skip
    from envkit.lock.place import place

    render.report(report, as_json, place(loaded))
    return EXIT_OK if report.ok else EXIT_CHECK_FAILED


COMMANDS = (profiles, show, build, verify)
