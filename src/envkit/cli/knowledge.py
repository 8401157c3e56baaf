"""CLI commands for envkit's knowledge: envkit refresh, envkit knowledge export."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from envkit import render
from envkit.cli.options import State, complete_profiles, index_url_option, json_option
from envkit.errors import EXIT_BAD_INPUT, EXIT_OK, BadInput
from envkit.profiles.catalog import Catalog

if TYPE_CHECKING:
    from envkit.compat.check.checker import Checker
    from envkit.profiles.profile import Profile

# Core modules are imported inside the commands that use them: each command loads only its own.

_PLATFORMS = ("linux-x86_64", "linux-aarch64")


@click.command()
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="The kernel table to bring up to date [default: gpu-kernels.json in your data "
    "folder, which envkit then reads instead of its own while it is not older].",
)
@click.option(
    "--platform",
    type=click.Choice(_PLATFORMS),
    default=_PLATFORMS[0],
    show_default=True,
    help="The wheels read.",
)
@index_url_option
@json_option
def refresh(out: Path | None, platform: str, index: str | None, as_json: bool) -> int:
    """Bring envkit's knowledge up to date from the index, touching only what is new.

    New vLLM releases (and the torch releases they pin) are read into the kernel table,
    their registries and test-registry bounds into the cache; releases and wheels already
    known (by sha256) are not read again. Says what changed, or that nothing did.
    Exit 0 (changed or not), 2 when the index cannot be read.
    """
    from envkit.gpu.published.refresh import refresh as run
    from envkit.index import snapshot
    from envkit.io.urls import index_url
    from envkit.render.knowledge import refreshed

    if snapshot.active() is not None:
        raise BadInput(
            "envkit refresh reads the index, and --knowledge FILE forbids the network.",
            "Run envkit refresh without --knowledge (or ENVKIT_KNOWLEDGE) where the index "
            "is reachable.",
        )
    if out is not None:
        from envkit.io.atomicfile import writable

        writable(out)  # a folder that cannot take it fails now, not after the reads
    result = run(index_url(index), out=out, platform=platform, progress=render.progress)
    refreshed(result, as_json)
    return EXIT_OK


@click.group()
def knowledge() -> None:
    """Snapshots of what envkit reads from the index, for machines with no network."""


@knowledge.command("export")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--for",
    "names",
    multiple=True,
    metavar="PROFILE",
    shell_complete=complete_profiles,
    help="A profile to fill the snapshot for (repeat it) [default: --all].",
)
@click.option("--all", "every", is_flag=True, help="Every profile envkit finds.")
@click.option(
    "--history",
    is_flag=True,
    help="Also every vLLM release's registry (for envkit history, and check-model of a "
    "model no profile loads).",
)
@click.option(
    "--upgrade",
    is_flag=True,
    help="Also what `envkit upgrade PROFILE` reads (its default search: newer releases, "
    "their registries, compat reports and serve flags).",
)
@index_url_option
@json_option
@click.pass_obj
def export(
    state: State,
    /,
    file: Path,
    names: tuple[str, ...],
    every: bool,
    history: bool,
    upgrade: bool,
    index: str | None,
    as_json: bool,
) -> int:
    """Write FILE: everything check-model, compat and lint (and with --upgrade, upgrade)
    read from the index for the profiles, so that `envkit --knowledge FILE COMMAND`
    answers with no network.

    What is missing is read first (from the cache when it holds it), with progress; FILE
    is written at once when complete. Exit 0 when it holds everything, 2 when something
    could not be read (FILE is still written, and says what it lacks).
    """
    from envkit.io.urls import index_url
    from envkit.models.knowledgefill import export as run
    from envkit.render.knowledge import exported_knowledge

    if every and names:
        raise BadInput("Name the profiles with --for, or pass --all (not both).")
    from envkit.io.atomicfile import writable

    writable(file)  # a folder that cannot take FILE fails now, not after the reads
    catalog = Catalog.from_option(state.envs)
    if names:
        profiles = [catalog.resolve(name) for name in names]
    else:
        listing = catalog.list()
        state.broken = len(listing.errors)
        render.broken_profiles(listing.errors)  # named, then the others go on
        profiles = list(listing.profiles)
    result = run(
        file,
        profiles,
        index_url(index),
        history=history,
        also=_upgrade_search() if upgrade else None,
        progress=render.progress,
    )
    exported_knowledge(result, as_json)
    return state.worst(EXIT_OK if result.complete else EXIT_BAD_INPUT)


def _upgrade_search() -> Callable[[Checker, Profile], object]:
    """``envkit upgrade``'s default search, loaded only for ``--upgrade``."""
    from envkit.upgrades.upgrade import search

    return search


COMMANDS = (refresh, knowledge)
