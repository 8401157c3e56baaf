"""CLI command for the compatibility site: site."""

from __future__ import annotations

from pathlib import Path

import click

from envkit import render
from envkit.cli.options import State, constraints_option, index_url_option, json_option
from envkit.errors import EXIT_OK
from envkit.profiles.catalog import Catalog


@click.command()
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    metavar="DIR",
    help="Where the site goes: a new or empty folder, or a site envkit wrote before.",
)
@index_url_option
@constraints_option
@json_option
@click.pass_obj
def site(state: State, out: Path, index: str | None, constraints: str | None, as_json: bool) -> int:
    """Write a static site: which vLLM release loads which architecture, the shipped profiles
    and their locks, the known-bad pairs compat finds.

    Plain HTML and CSS with a little JavaScript for the search; it works from file://.
    Built from the scans envkit caches: a cold run reads every vLLM release (a few minutes),
    a warm one takes seconds, and the same caches give the same bytes.
    """
    from envkit.compat.check.checker import Checker
    from envkit.io.urls import index_url
    from envkit.releases.registry import Scanner
    from envkit.site.build import previous_files, write
    from envkit.site.data import gather

    previous_files(out)  # refuse a folder envkit did not make before any network
    listing = Catalog.from_option(state.envs).list()
    render.broken_profiles(listing.errors)
    scanner = Scanner(index_url(index), progress=render.progress)
    checker = Checker(scanner.index, http=scanner.http, progress=render.progress)
    data = gather(scanner, checker, list(listing.profiles), constraints, render.progress)
    result = write(out, data)
    render.site(result, len(data.rows), len(data.releases), as_json)
    return state.worst(EXIT_OK)


COMMANDS = (site,)
