"""CLI commands for fleets of nodes: fingerprint, fleet check."""

from __future__ import annotations

from pathlib import Path

import click

from envkit import render
from envkit.cli.options import State, complete_profiles, constraints_option, json_option
from envkit.errors import EXIT_OK, BadInput
from envkit.profiles.catalog import Catalog

# Core modules are imported inside the commands that use them: each command loads only its own.

_VENV_HELP = (
    "The venv to fingerprint (on every node: the same path) [default: the environment "
    "envkit runs in; through Ray, the one the Ray workers run in]."
)
_HASHES_HELP = "Do not hash installed files against their RECORD (faster; files: unchecked)."


@click.command()
@click.option("--venv", type=click.Path(path_type=Path), help=_VENV_HELP)
@click.option("--no-hashes", is_flag=True, help=_HASHES_HELP)
@json_option
def fingerprint(venv: Path | None, no_hashes: bool, as_json: bool) -> int:
    """This node's facts: host, GPUs, driver, distributions, Python, Ray, /dev/shm, NCCL.

    `envkit fingerprint --json > FILE` on each node (srun, kubectl exec, ssh) makes the files
    `envkit fleet check` judges.
    """
    from envkit.fleet.gather import fingerprint as gather

    render.fingerprint(gather(venv, hashes=not no_hashes), as_json)
    return EXIT_OK


@click.group()
def fleet() -> None:
    """Check a fleet of nodes against one profile's lock."""


@fleet.command()
@click.argument("profile", shell_complete=complete_profiles)
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--ray", "address", metavar="ADDRESS", help="Ask every alive node of this Ray cluster."
)
@click.option("--venv", type=click.Path(path_type=Path), help=_VENV_HELP)
@click.option(
    "--cell",
    metavar="CELL",
    help="Judge every node against this cell [default: each node's Python and platform].",
)
@click.option(
    "--timeout",
    type=click.FloatRange(1, 3600),
    default=120,
    show_default=True,
    help="Seconds to wait for the nodes' answers (through Ray).",
)
@click.option("--no-hashes", is_flag=True, help=_HASHES_HELP)
@constraints_option
@json_option
@click.pass_obj
def check(
    state: State,
    profile: str,
    files: tuple[Path, ...],
    address: str | None,
    venv: Path | None,
    cell: str | None,
    timeout: float,
    no_hashes: bool,
    constraints: str | None,
    as_json: bool,
) -> int:
    """Judge every node against PROFILE's lock cell and the GPU layer.

    The nodes are those of the Ray cluster at --ray, or the fingerprint files given
    (`envkit fingerprint --json` on each node). Exit 1 naming each node that differs.
    """
    from envkit.fleet import fleetcheck

    if bool(address) == bool(files):
        raise BadInput(
            "Give the nodes one way: --ray ADDRESS, or fingerprint files (not both).",
            "Files come from `envkit fingerprint --json > FILE` on each node.",
        )
    found = Catalog.from_option(state.envs).resolve(profile)
    if address:
        from envkit.fleet import raynodes

        answers = raynodes.gather(address, venv, timeout=timeout, hashes=not no_hashes)
        source = f"Ray at {address}"
    else:
        from envkit.wording import counted

        answers = fleetcheck.from_files(list(files))
        source = counted(len(files), "fingerprint file")
    result = fleetcheck.check(found, answers, source=source, venv=venv, cell=cell, root=constraints)
    render.fleet_check(result, as_json)
    return result.exit_code


COMMANDS = (fingerprint, fleet)
