"""CLI command for engines: envkit export."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from envkit import render
from envkit.cli.options import (
    State,
    complete_profiles,
    constraints_option,
    index_url_option,
    json_option,
    plan_options,
    plan_values,
    torch_index_option,
)
from envkit.errors import EXIT_OK, BadInput
from envkit.profiles.catalog import Catalog

ENGINES = ("kubernetes", "production-stack", "kserve", "ray", "slurm")


def _secret_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    from envkit.deploy.facts import dns_name

    if value is None:
        return None
    if value != dns_name(value):
        raise click.BadParameter("give a Secret's name: lower case, digits and '-'", ctx, param)
    return value


@click.command()
@click.argument("profile", shell_complete=complete_profiles)
@click.argument("model")
@click.option("--to", "engine", required=True, type=click.Choice(ENGINES), help="The engine.")
@click.option("--image", metavar="REF@sha256:DIGEST", help="The image to run, by digest.")
@click.option("--allow-tag", is_flag=True, help="Accept an --image given by tag alone.")
@click.option("--cell", metavar="CELL", help="The lock cell [default: the one for this machine].")
@click.option("--replicas", type=click.IntRange(1, 1000), default=1, show_default=True)
@click.option(
    "--nodes",
    type=click.IntRange(1, 256),
    default=1,
    show_default=True,
    help="Nodes per replica: above 1, pipeline parallelism across them on Ray.",
)
@click.option(
    "--gpus-per-node",
    type=click.IntRange(1, 16),
    default=1,
    show_default=True,
    help="GPUs per node: above 1, tensor parallelism across them.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("."),
    show_default=True,
    help="The folder to write the files in.",
)
@click.option(
    "--venv",
    type=click.Path(path_type=Path),
    help="Slurm without --image: the venv built from the cell, on a file system every node sees.",
)
@click.option(
    "--hf-token-secret",
    callback=_secret_name,
    default="hf-token",
    show_default=True,
    help="The Secret whose key 'token' holds the Hub token (optional in the pod).",
)
@click.option(
    "--api-key-secret",
    callback=_secret_name,
    help="The Secret whose key 'api-key' holds vLLM's API key [default: no key].",
)
@plan_options
@constraints_option
@index_url_option
@torch_index_option
@json_option
@click.pass_context
def export(ctx: click.Context, /, **values: Any) -> int:
    """Write the files an engine runs PROFILE's vLLM with: the lock cell, the plan's
    arguments for MODEL on the GPU (--gpu NAME or --gpu-memory SIZE), the GPU layer's node
    affinity and envkit's verdicts, each flag checked by envkit lint first."""
    from envkit.deploy import export as core
    from envkit.deploy import gather
    from envkit.deploy.facts import image_for
    from envkit.deploy.kubernetes import Secrets

    state: State = ctx.obj
    asked = plan_values(ctx, values)
    if asked.gpu is None:
        raise BadInput("Give the GPU: --gpu NAME, or --gpu-memory SIZE (8GiB, 24GB).")
    loaded = Catalog.from_option(state.envs).resolve(values["profile"])
    image = image_for(values["image"], values["allow_tag"])
    options = core.ExportOptions(
        engine=core.Engine(values["engine"]),
        out=values["out"].absolute(),
        image=image,
        replicas=values["replicas"],
        nodes=values["nodes"],
        gpus_per_node=values["gpus_per_node"],
        venv=values["venv"].absolute() if values["venv"] is not None else None,
        secrets=Secrets(
            hf_token=values["hf_token_secret"] or "", api_key=values["api_key_secret"] or ""
        ),
    )
    planned = gather.planned(
        loaded,
        values["model"],
        asked.gpu,
        asked.settings,
        asked.target.target,
        options,
        cell=values["cell"],
        constraints=values["constraints"],
        index=values["index"],
        torch_index=values["torch_index"],
        progress=render.progress,
    )
    result = core.export(loaded, planned, options)
    render.exported(result, values["as_json"])
    return EXIT_OK


COMMANDS = (export,)
