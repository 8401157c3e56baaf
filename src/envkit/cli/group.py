"""The ``envkit`` command group and its options (``--envs``, ``--wide``, ``--version``).

The group's options are accepted after the subcommand too (``envkit lock --envs DIR X`` as
well as ``envkit --envs DIR lock X``), as uv and pip take options anywhere:
:func:`add_group_options` gives every subcommand the same options, setting the same state.

The group is lazy: :data:`COMMAND_MODULES` names the module of every command, and a module
is imported only when one of its commands runs (or ``envkit --help`` lists them all, with
their short help), so a command pays for its own imports alone.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from envkit import __version__
from envkit.cli.options import State
from envkit.io import faults
from envkit.render import term

# command -> the module that defines it (in its COMMANDS); tests/cli/test_group.py holds
# this table to the modules, and tests/test_layout.py reads it as those modules' imports
COMMAND_MODULES = {
    "profiles": "envkit.cli.env",
    "show": "envkit.cli.env",
    "build": "envkit.cli.env",
    "verify": "envkit.cli.env",
    "check-model": "envkit.cli.models",
    "which": "envkit.cli.models",
    "scan": "envkit.cli.models",
    "new-profile": "envkit.cli.models",
    "history": "envkit.cli.models",
    "compat": "envkit.cli.models",
    "lock": "envkit.cli.locks",
    "matrix": "envkit.cli.locks",
    "publish": "envkit.cli.locks",
    "plan": "envkit.cli.serving",
    "probe": "envkit.cli.serving",
    "doctor": "envkit.cli.serving",
    "explain": "envkit.cli.serving",
    "serve": "envkit.cli.serving",
    "image": "envkit.cli.image",
    "export": "envkit.cli.export",
    "lint": "envkit.cli.lint",
    "upgrade": "envkit.cli.upgrade",
    "fingerprint": "envkit.cli.fleet",
    "fleet": "envkit.cli.fleet",
    "site": "envkit.cli.site",
    "refresh": "envkit.cli.knowledge",
    "knowledge": "envkit.cli.knowledge",
}

ENVS_HELP = (
    "Folder of profile files, used alone [default: ./envs, then your profile folder, then "
    "envkit's own; env: ENVKIT_ENVS]."
)
WIDE_HELP = "Never shorten or fold text to the terminal's width (for logs and wide screens)."
KNOWLEDGE_HELP = (
    "Answer from this snapshot (envkit knowledge export) alone, with no network "
    "[env: ENVKIT_KNOWLEDGE]."
)


def _envs(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value is not None:  # after the subcommand: overrides the group's (or ENVKIT_ENVS)
        ctx.find_object(State).envs = value  # type: ignore[union-attr]
    return value


def _wide(_ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        term.set_wide(True)
    return value


def _knowledge(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """Use the snapshot ``value`` names, verified whole (exit 2 when it is not usable)."""
    if value is not None and not ctx.resilient_parsing:
        use_knowledge(value)
    return value


def use_knowledge(value: str) -> None:
    from pathlib import Path

    from envkit.index import snapshot
    from envkit.render.knowledge import knowledge_in_use

    found = snapshot.read(Path(value))
    snapshot.use(found)
    knowledge_in_use(found)


def add_group_options(command: click.Command) -> None:
    """Give ``command`` the group's options, so they may follow the subcommand's name."""
    command.params += [
        click.Option(["--envs"], metavar="DIR", expose_value=False, callback=_envs, help=ENVS_HELP),
        click.Option(["--wide"], is_flag=True, expose_value=False, callback=_wide, help=WIDE_HELP),
        click.Option(
            ["--knowledge"],
            metavar="FILE",
            expose_value=False,
            callback=_knowledge,
            help=KNOWLEDGE_HELP,
        ),
    ]
    click.version_option(__version__, prog_name="envkit")(command)
    if command.help and not command.short_help:  # `envkit --help` lists it whole, not cut
        command.short_help = " ".join(command.help.split("\n\n")[0].split())


class _Context(click.Context):
    """The group's context: a Ctrl-C while it is torn down (its close callbacks run after
    the command, inside click's main) is Abort too, as one while parsing or running is."""

    def __exit__(self, *exc_info: Any) -> Any:
        try:  # click 8.2 on closes through its own helper here, not through close()
            return super().__exit__(*exc_info)
        except KeyboardInterrupt:
            raise click.exceptions.Abort() from None


class LazyGroup(click.Group):
    """A group whose commands are imported when first asked for (see the module's doc)."""

    context_class = _Context

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMAND_MODULES)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return load(cmd_name) if cmd_name in COMMAND_MODULES else None

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0]
        known = name in COMMAND_MODULES or name.startswith("-")
        if not (known or ctx.resilient_parsing):
            # click's own would suggest close names from the commands loaded so far only
            raise click.exceptions.NoSuchCommand(
                name, possibilities=sorted(COMMAND_MODULES), ctx=ctx
            )
        return super().resolve_command(ctx, args)

    # A Ctrl-C while click parses the arguments or runs the command (or, in _Context, tears
    # it down): click's main would print an empty line first; as Abort, cli.app says
    # "Interrupted." alone
    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except KeyboardInterrupt:
            raise click.exceptions.Abort() from None

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise click.exceptions.Abort() from None


_loaded: dict[str, click.Command] = {}


def load(name: str) -> click.Command:
    """The command ``name`` of :data:`COMMAND_MODULES`, its module imported on first use and
    every command of it given the group's options (once per process)."""
    if name not in _loaded:
        faults.fault_point("command-import")
        module = importlib.import_module(COMMAND_MODULES[name])
        term.start()  # progress counts the seconds since the command began, not its imports
        for command in module.COMMANDS:
            if command.name not in _loaded:
                add_group_options(command)
                for sub in getattr(command, "commands", {}).values():  # a group's own
                    add_group_options(sub)
                _loaded[str(command.name)] = command
    return _loaded[name]


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog="Exit codes:\n\n\b\n" + term.exit_codes_help(),
)
@click.version_option(__version__, prog_name="envkit")
@click.option("--envs", metavar="DIR", envvar="ENVKIT_ENVS", help=ENVS_HELP)
@click.option("--wide", is_flag=True, help=WIDE_HELP)
@click.option("--knowledge", metavar="FILE", envvar="ENVKIT_KNOWLEDGE", help=KNOWLEDGE_HELP)
@click.pass_obj
def cli(state: State, envs: str | None, wide: bool, knowledge: str | None) -> None:
    """envkit: declarative, verified vLLM environments built with uv.

    Options of envkit itself (--envs, --wide, --knowledge) may come before or after the
    command.
    Shell completion (commands, options, profile names): add
    `eval "$(_ENVKIT_COMPLETE=bash_source envkit)"` to ~/.bashrc (zsh_source, fish_source
    for zsh and fish).
    """
    state.envs = envs
    term.set_wide(wide)
    if knowledge:
        use_knowledge(knowledge)
