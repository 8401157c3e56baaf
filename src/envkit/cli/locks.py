"""CLI commands for lock matrices: lock, matrix, publish."""

from __future__ import annotations

from pathlib import Path

import click

from envkit import render
from envkit.cli.options import (
    State,
    complete_profiles,
    constraints_option,
    index_url_option,
    json_option,
    torch_index_option,
)
from envkit.errors import EXIT_OK, BadInput
from envkit.io.uv import Uv
from envkit.lock import states
from envkit.lock.adopt import adopt, needs_copy
from envkit.lock.cells import check_exit_code, lock_exit_code
from envkit.lock.locker import Locker, LockOptions
from envkit.lock.place import Place, place
from envkit.lock.torchsource import TorchIndex
from envkit.profiles.catalog import Catalog
from envkit.profiles.profile import Profile
from envkit.wording import agree


def _profiles(
    state: State,
    names: tuple[str, ...],
    every: bool,
    writes: str = "",
    constraints: str | None = None,
) -> list[Profile]:
    """The profiles named (looked up as every command looks them up: ./envs, the user's
    folder, the shipped ones), or with ``every`` those of one folder (catalog.project).
    ``writes`` (what the command does to them, "locks"): it writes beside them; a shipped one
    is first copied to where new profiles go (lock.adopt), which is said, and the copy used."""
    if every == bool(names):
        raise BadInput("Name the profiles, or pass --all (not both).")
    catalog = Catalog.from_option(state.envs)
    if every:
        project = catalog.project()
        listing = project.list()
        state.broken = len(listing.errors)
        render.broken_profiles(listing.errors)  # named, then the others go on
        chosen = list(listing.profiles)
        if not chosen:  # nothing to lock, list or publish: never an empty index written
            folder = str(project.folders[0].absolute())
            raise BadInput(
                f"No profile in {folder!r}"
                + (
                    f" can be read: the {state.broken} above "
                    + agree(state.broken, "is broken.", "are broken.")
                    if state.broken
                    else "."
                ),
                "Draft one (envkit new-profile NAME --for-model MODEL), or name a profile "
                "(envkit profiles lists those on the path, envkit's own among them).",
            )
    else:
        chosen = [catalog.resolve(name) for name in names]
    if not writes:
        return chosen
    return [
        _own(catalog, p, writes) if needs_copy(p, catalog.shipped(p), constraints) else p
        for p in chosen
    ]


def _own(catalog: Catalog, profile: Profile, doing: str) -> Profile:
    adopted = adopt(profile, catalog.writable())
    render.note(adopted.note(place(adopted.profile).locks, doing))
    return adopted.profile


@click.command()
@click.argument("profiles", nargs=-1, shell_complete=complete_profiles)
@click.option("--all", "every", is_flag=True, help="Every profile in the profiles folder.")
@click.option("--cell", metavar="CELL", help="Only this cell (e.g. py3.12-linux-x86_64-cu124).")
@click.option(
    "--jobs",
    type=click.IntRange(1, 64),
    default=4,
    show_default=True,
    help="Cells resolved at once.",
)
@click.option(
    "--check", is_flag=True, help="Change nothing: exit 1 naming every stale or missing cell."
)
@click.option("--resolve", is_flag=True, help="With --check: also resolve every cell again.")
@click.option(
    "--refresh",
    is_flag=True,
    help="Ask the index even where uv's cache could answer (profiles with exclude_newer "
    "otherwise resolve from the cache first).",
)
@torch_index_option
@index_url_option
@constraints_option
@json_option
@click.pass_obj
def lock(
    state: State,
    profiles: tuple[str, ...],
    every: bool,
    cell: str | None,
    jobs: int,
    check: bool,
    resolve: bool,
    refresh: bool,
    torch_index: TorchIndex,
    index: str | None,
    constraints: str | None,
    as_json: bool,
) -> int:
    """Resolve every cell of each profile (Python x platform x torch backend) with hashes.

    Writes constraints/<profile>/<cell>.txt and a PEP 751 pylock beside it.
    """
    chosen = _profiles(
        state, profiles, every, writes="" if check else "locks", constraints=constraints
    )
    locker = Locker(
        Uv(),
        LockOptions(
            torch_index=torch_index,
            index_url=index,
            jobs=jobs,
            root=constraints,
            refresh=refresh or resolve,
        ),
        render.progress,
        render.note,
    )
    if check:
        found = states.check(chosen, constraints, locker if resolve else None)
        render.lock_check(found, _places(chosen, constraints), as_json)
        return state.worst(check_exit_code(s.status for s in found))
    if resolve:
        raise BadInput("--resolve goes with --check.")
    refused = _compat_refusals(chosen, index)
    results = locker.lock(chosen, only=cell, refused=refused)
    render.lock_results(results, _places(chosen, constraints), as_json)
    return state.worst(lock_exit_code(r.status for r in results))


def _places(profiles: list[Profile], constraints: str | None) -> list[Place]:
    return [place(p, constraints) for p in profiles]


def _compat_refusals(profiles: list[Profile], index: str | None) -> dict[str, str]:
    """Profiles whose pins fail `envkit compat` (checked on the index envkit reads)."""
    from envkit.compat.check.checker import Checker
    from envkit.compat.check.enforcement import lock_refusals
    from envkit.io.urls import index_url

    try:
        checker = Checker(index_url(index), progress=render.progress)
    except BadInput as exc:  # an index envkit cannot read (a file:// folder): uv still can
        render.note(f"compat of the pins not checked: {exc.message}")
        return {}
    return lock_refusals(profiles, checker, render.note)


@click.command()
@click.argument("profile", required=False, shell_complete=complete_profiles)
@click.option(
    "--github",
    is_flag=True,
    help='Print a GitHub Actions strategy.matrix object: {"include": [...]}.',
)
@constraints_option
@json_option
@click.pass_obj
def matrix(
    state: State, profile: str | None, github: bool, constraints: str | None, as_json: bool
) -> int:
    """The lock cells of one profile (or all) and their state."""
    chosen = _profiles(state, (profile,) if profile else (), not profile)
    found = [s for p in chosen for s in states.states(p, constraints)]
    if github:
        render.github_matrix(states.github_matrix(found))
    else:
        render.matrix(found, _places(chosen, constraints), as_json)
    return state.worst(EXIT_OK)


@click.command()
@click.argument("profiles", nargs=-1, shell_complete=complete_profiles)
@click.option("--all", "every", is_flag=True, help="Every profile in the profiles folder.")
@click.option(
    "--to",
    "to",
    type=click.Path(path_type=Path),
    metavar="DIR",
    help="Publish into DIR instead of the constraints folder itself.",
)
@constraints_option
@json_option
@click.pass_obj
def publish(
    state: State,
    profiles: tuple[str, ...],
    every: bool,
    to: Path | None,
    constraints: str | None,
    as_json: bool,
) -> int:
    """Write the locked cells and constraints/index.json (file, sha256, digest), atomically."""
    chosen = _profiles(
        state, profiles, every, writes="" if to else "publishes", constraints=constraints
    )
    result = states.publish(chosen, constraints, to)
    render.published(result, _places(chosen, constraints), as_json)
    return state.worst(EXIT_OK)


COMMANDS = (lock, matrix, publish)
