"""CLI command: envkit upgrade (move profiles to a newer vLLM, side by side, and --write)."""

from __future__ import annotations

from typing import Any

import click

from envkit import render
from envkit.cli.options import (
    CAPABILITY_HELP,
    DRIVER_HELP,
    GPU_HELP,
    State,
    complete_profiles,
    constraints_option,
    index_url_option,
    json_option,
    parse_capability,
    parse_card,
    parse_driver,
    torch_index_option,
)
from envkit.errors import EXIT_CHECK_FAILED, EXIT_OK, BadInput


def _to(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Any:
    from envkit.upgrades.target import parse_to

    return parse_to(value) if value is not None else None


@click.command()
@click.argument("profiles", nargs=-1, shell_complete=complete_profiles)
@click.option("--all", "every", is_flag=True, help="Every profile in the profiles folder.")
@click.option(
    "--to", "to", metavar="vllm==X", callback=_to,
    help="Move to this vLLM release, whatever it loses [default: the newest that keeps "
    "every model, GPU and the driver].",
)  # fmt: skip
@click.option("--gpu", "gpu_name", metavar="NAME", callback=parse_card, help=GPU_HELP)
@click.option("--compute-capability", metavar="X.Y", callback=parse_capability,
              help=CAPABILITY_HELP)  # fmt: skip
@click.option("--driver", metavar="VERSION", callback=parse_driver, help=DRIVER_HELP)
@click.option(
    "--write", is_flag=True,
    help="Rewrite the profile (comments kept), relock its cells and publish them; without "
    "it nothing is written.",
)  # fmt: skip
@torch_index_option
@index_url_option
@constraints_option
@json_option
@click.pass_obj
def upgrade(state: State, /, profiles: tuple[str, ...], every: bool, **values: Any) -> int:
    """Move each of PROFILES to a newer vLLM (and the transformers and torch picked for it): the
    newest that still loads every model of the profile's [models], runs on its GPUs (or the
    one given) and the driver, or --to vllm==X. Prints old and new side by side, each row
    with its evidence: models, GPUs, driver and CUDA, Python, compat, transformers bounds,
    the [serve] table's flags and variables, companion pins.

    Exit 0 when the move keeps everything, 1 when something is lost (listed), 2 on bad input.
    """
    from envkit.cli.locks import _compat_refusals, _profiles
    from envkit.compat.check.checker import Checker
    from envkit.gpu.published import kerneltable
    from envkit.io.urls import index_url
    from envkit.io.uv import Uv
    from envkit.lock.cells import lock_exit_code
    from envkit.lock.locker import Locker, LockOptions
    from envkit.render.upgrade import upgrades
    from envkit.upgrades.upgrade import Asked, plan, write

    card, level = values["gpu_name"], values["compute_capability"]
    if card is not None and level is not None and card.capability != level:
        raise BadInput(
            f"--gpu {card.key} has compute capability {card.capability}, not {level}.",
            "Give one of --gpu and --compute-capability.",
        )
    gpu = level or (card.capability if card is not None else None)
    said = f"--gpu {card.key}" if card is not None else f"--compute-capability {gpu}"
    asked = Asked((gpu,) if gpu else (), said if gpu else "", values["driver"], values["to"])
    writing = values["write"]
    index, root = values["index"], values["constraints"]
    chosen = _profiles(state, profiles, every, "upgrades" if writing else "", root)
    checker = Checker(index_url(index), progress=render.progress)
    table = kerneltable.shipped()
    done = [plan(p, checker, table, asked) for p in chosen]
    code = EXIT_CHECK_FAILED if any(u.lost for u in done) else EXIT_OK
    if writing:
        locker = Locker(
            Uv(),
            LockOptions(torch_index=values["torch_index"], index_url=index, root=root),
            render.progress,
            render.note,
        )
        done = [
            write(u, checker, locker, lambda ps: _compat_refusals(ps, index), root) for u in done
        ]
        code = max(code, *(lock_exit_code(r.status for r in u.locked) for u in done))
    upgrades(done, writing, values["as_json"])
    return state.worst(code)


COMMANDS = (upgrade,)
