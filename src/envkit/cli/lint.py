"""CLI command: envkit lint (vllm serve arguments and VLLM_* variables against a profile's vLLM)."""

from __future__ import annotations

from pathlib import Path

import click

from envkit.cli.options import State, complete_profiles, index_url_option, json_option
from envkit.errors import EXIT_CHECK_FAILED, EXIT_OK, BadInput
from envkit.profiles.catalog import Catalog


@click.command()
@click.argument("profile", shell_complete=complete_profiles)
@click.argument("vllm_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- VLLM_SERVE_ARGS...]")
@click.option(
    "--file",
    "file",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="Read the arguments and environment from compose.yaml, a Helm values.yaml, a "
    "Kubernetes Deployment or a shell script's vllm serve line.",
)
@index_url_option
@json_option
@click.pass_obj
def lint(
    state: State,
    /,
    profile: str,
    vllm_args: tuple[str, ...],
    file: Path | None,
    index: str | None,
    as_json: bool,
) -> int:
    """Check vllm serve arguments and VLLM_* variables against PROFILE's vLLM release, read
    from its wheel (nothing installed): unknown, removed and renamed flags (with the last
    release that had them and the replacement), variables the release ignores, the model
    given the way the release does not take it.

    Exit 0 when the release has every flag, each given the number of values it takes (what
    a value says is not checked), 1 on an error finding, 2 on bad input.
    """
    from envkit import render
    from envkit.index.session import IndexSession
    from envkit.io.urls import index_url
    from envkit.render.lint import lint_report
    from envkit.serving.lint.check import lint_args

    if file is None and not vllm_args:
        raise BadInput(
            "Nothing to check: no arguments after -- and no --file.",
            "Give vllm serve's arguments after -- (the model first), or: envkit lint PROFILE "
            "--file compose.yaml.",
        )
    args: list[str] = []
    env: dict[str, str] = {}
    where = ""
    if file is not None:
        from envkit.serving.lint.files import read_deployment

        found = read_deployment(file)
        args, env, where = list(found.args), dict(found.env), found.where
    else:  # a command line pasted after --: its leading NAME=value words are its environment
        from envkit.serving.lint.files import leading_assignments

        env, given = leading_assignments(list(vllm_args))
        vllm_args = tuple(given)
    args += list(vllm_args)
    loaded = Catalog.from_option(state.envs).resolve(profile)
    session = IndexSession(index_url(index), progress=render.progress)
    report = lint_args(loaded, args, env, session=session, typed=file is None)
    lint_report(report, where, as_json)
    return EXIT_OK if report.ok else EXIT_CHECK_FAILED


COMMANDS = (lint,)
