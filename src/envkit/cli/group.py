"""The ``envkit`` command group: global options only; the commands are added in __init__."""

from __future__ import annotations

import click

from envkit import __version__, render
from envkit.cli.options import State


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
@click.option(
    "--wide",
    is_flag=True,
    help="Never shorten or fold text to the terminal's width (for logs and wide screens).",
)
@click.pass_obj
def cli(state: State, envs: str | None, wide: bool) -> None:
    """envkit: declarative, verified vLLM environments built with uv.

    Shell completion (commands, options, profile names): add
    `eval "$(_ENVKIT_COMPLETE=bash_source envkit)"` to ~/.bashrc (zsh_source, fish_source
    for zsh and fish).
    """
    state.envs = envs
    render.set_wide(wide)
