"""The ``envkit`` command group and its options (``--envs``, ``--wide``, ``--version``).

The group's options are accepted after the subcommand too (``envkit lock --envs DIR X`` as
well as ``envkit --envs DIR lock X``), as uv and pip take options anywhere:
:func:`add_group_options` gives every subcommand the same options, setting the same state.
"""

from __future__ import annotations

import click

from envkit import __version__, render
from envkit.cli.options import State

ENVS_HELP = (
    "Folder of profile files, used alone [default: ./envs, then your profile folder, then "
    "envkit's own; env: ENVKIT_ENVS]."
)
WIDE_HELP = "Never shorten or fold text to the terminal's width (for logs and wide screens)."


def _envs(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is not None:  # after the subcommand: overrides the group's (or ENVKIT_ENVS)
        ctx.find_object(State).envs = value  # type: ignore[union-attr]
    return value


def _wide(_ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        render.set_wide(True)
    return value


def add_group_options(command: click.Command) -> None:
    """Give ``command`` the group's options, so they may follow the subcommand's name."""
    command.params += [
        click.Option(["--envs"], metavar="DIR", expose_value=False, callback=_envs, help=ENVS_HELP),
        click.Option(["--wide"], is_flag=True, expose_value=False, callback=_wide, help=WIDE_HELP),
    ]
    click.version_option(__version__, prog_name="envkit")(command)
    if command.help and not command.short_help:  # `envkit --help` lists it whole, not cut
        command.short_help = " ".join(command.help.split("\n\n")[0].split())


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="Exit codes:\n\n\b\n" + render.exit_codes_help(),
)
@click.version_option(__version__, prog_name="envkit")
@click.option("--envs", metavar="DIR", envvar="ENVKIT_ENVS", help=ENVS_HELP)
@click.option("--wide", is_flag=True, help=WIDE_HELP)
@click.pass_obj
def cli(state: State, envs: str | None, wide: bool) -> None:
    """envkit: declarative, verified vLLM environments built with uv.

    Options of envkit itself (--envs, --wide) may come before or after the command.
    Shell completion (commands, options, profile names): add
    `eval "$(_ENVKIT_COMPLETE=bash_source envkit)"` to ~/.bashrc (zsh_source, fish_source
    for zsh and fish).
    """
    state.envs = envs
    render.set_wide(wide)
