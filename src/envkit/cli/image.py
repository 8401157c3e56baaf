"""CLI command for images: envkit image."""

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
from envkit.errors import EXIT_CHECK_FAILED, EXIT_OK, BadInput, ToolNotFound
from envkit.lock.torchsource import TorchIndex
from envkit.profiles.catalog import Catalog


def _archive(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
    """--save oci-archive:PATH (the transport buildah and podman name it by)."""
    if value is None:
        return None
    path = value.removeprefix("oci-archive:")
    if not path or "\n" in path or "\x00" in path:
        raise click.BadParameter("give oci-archive:PATH, a file to write", ctx, param)
    return Path(path).absolute()


@click.command()
@click.argument("profile", shell_complete=complete_profiles)
@click.option("--cell", metavar="CELL", help="The lock cell [default: the one for this machine].")
@click.option(
    "--base", required=True, metavar="IMAGE", help="The base image (its Python must be the cell's)."
)
@click.option("--tag", default="", metavar="TAG", help="Tag the image once its checks hold.")
@click.option(
    "--builder",
    type=click.Choice(["buildah", "podman", "docker"]),
    help="The builder [default: the first of buildah, podman, docker on PATH].",
)
@click.option(
    "--isolation",
    type=click.Choice(["chroot", "oci", "rootless"]),
    help="buildah's and podman's isolation [default: chroot inside a container, else theirs].",
)
@click.option(
    "--context",
    "context_dir",
    type=click.Path(path_type=Path, file_okay=False),
    metavar="DIR",
    help="Write the build context (Containerfile and locked files) to DIR; alone, do not build.",
)
@click.option("--build/--no-build", "do_build", default=None, help="With --context: build it too.")
@click.option(
    "--save", callback=_archive, metavar="oci-archive:PATH", help="Also write an OCI archive."
)
@constraints_option
@index_url_option
@torch_index_option
@json_option
@click.pass_obj
def image(
    state: State,
    /,
    profile: str,
    cell: str | None,
    base: str,
    tag: str,
    builder: str | None,
    isolation: str | None,
    context_dir: Path | None,
    do_build: bool | None,
    save: Path | None,
    constraints: str | None,
    index: str | None,
    torch_index: TorchIndex,
    as_json: bool,
) -> int:
    """Build PROFILE's lock cell into an image: uv installs exactly the lock with hashes on
    BASE, envkit's checks run inside it, and only an image whose checks hold is tagged, with
    labels naming the profile, cell, lock sha256, versions, CUDA, driver floor and kernels."""
    from envkit.image import builder as builders
    from envkit.image.make import ImageOptions, make
    from envkit.image.spec import spec_for

    build = do_build if do_build is not None else context_dir is None
    if save is not None and not build:
        raise BadInput("--save needs a build; drop --no-build or --save.", "")
    if save is not None:
        from envkit.io.atomicfile import writable

        writable(save)  # a folder that cannot take the archive fails before the build
    loaded = Catalog.from_option(state.envs).resolve(profile)
    spec = spec_for(loaded, cell, constraints=constraints, index=index, torch_index=torch_index)
    try:
        found = builders.find(builder, isolation)
    except ToolNotFound:
        if build:
            raise
        found = None  # the context alone: the command shown is buildah's
    options = ImageOptions(base=base, tag=tag, context=context_dir, build=build, save=save)
    result = make(loaded, spec, options, found, progress=render.progress)
    render.image(result, as_json)
    return EXIT_OK if result.ok else EXIT_CHECK_FAILED


COMMANDS = (image,)
