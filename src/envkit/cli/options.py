"""Options and state shared by the commands: each defined once, checked where it enters."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
import click.shell_completion

from envkit import render
from envkit.errors import EXIT_BAD_INPUT

if TYPE_CHECKING:
    from envkit.env.checks import CompatLookup

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class State:
    envs: str | None = None
    json: bool = False
    broken: int = 0  # broken profiles met by a command about all profiles

    def worst(self, code: int) -> int:
        """A command over every profile ends with exit 2 when some profile was broken,
        after doing its work for the others."""
        return max(code, EXIT_BAD_INPUT) if self.broken else code


def json_option(func: F) -> F:
    def remember(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
        ctx.find_object(State).json = value  # type: ignore[union-attr]
        return value

    return click.option(
        "--json",
        "as_json",
        is_flag=True,
        is_eager=True,
        callback=remember,
        help="Print one JSON document (stable shape) instead of text.",
    )(func)


def venv_option(func: F) -> F:
    return click.option(
        "--venv",
        type=click.Path(path_type=Path),
        default=Path(".venv"),
        show_default=True,
        help="The virtual environment to build or check.",
    )(func)


def constraints_option(func: F) -> F:
    return click.option(
        "--constraints",
        metavar="DIR",
        envvar="ENVKIT_CONSTRAINTS",
        help="Folder of published locks [default: constraints/ beside envs/; "
        "env: ENVKIT_CONSTRAINTS].",
    )(func)


def _checked_torch_index(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Any:
    """The one place --torch-index (or $ENVKIT_TORCH_INDEX) is parsed: a TorchIndex."""
    from envkit.lock.torchsource import TorchIndex

    return TorchIndex.parse(value)


def _checked_index(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Any:
    from envkit.io.urls import check_index

    return check_index(value, "--index-url") if value is not None else None


def index_url_option(func: F) -> F:
    """--index-url, as uv's --default-index (scan reads the same index, see wheelfetch)."""
    return click.option(
        "--index-url",
        "index",
        metavar="URL",
        callback=_checked_index,
        help="The package index [default: $UV_DEFAULT_INDEX, $UV_INDEX_URL, else PyPI, as uv].",
    )(func)


def torch_index_option(func: F) -> F:
    return click.option(
        "--torch-index",
        metavar="default|URL",
        envvar="ENVKIT_TORCH_INDEX",
        callback=_checked_torch_index,
        help="Where torch comes from: 'default' takes it from the default index, a URL "
        "uses a PyTorch index mirror ('{backend}' is substituted). Verification still "
        "demands the profile's CUDA. [env: ENVKIT_TORCH_INDEX]",
    )(func)


def finite(value: float, name: str) -> float:
    """click's float ranges let NaN through (it compares false with every bound)."""
    if value != value:
        raise click.BadParameter(f"{name} must be a number, not {value}.")
    return value


def complete_profiles(
    ctx: click.Context, _param: click.Parameter, incomplete: str
) -> list[click.shell_completion.CompletionItem]:
    """Profile names for shell completion, from the same folders the commands search."""
    from envkit.profiles.catalog import Catalog

    state = ctx.find_object(State)
    try:
        listing = Catalog.from_option(state.envs if state else None).list()
    except Exception:
        return []
    return [
        click.shell_completion.CompletionItem(p.name, help=p.description.split("\n")[0])
        for p in listing.profiles
        if p.name.startswith(incomplete)
    ]


def revision_option(func: F) -> F:
    return click.option(
        "--revision",
        metavar="REV",
        help="For a Hub repo id: the branch, tag or commit to read config.json from "
        "[default: main].",
    )(func)


def compat_lookup(index: str | None) -> CompatLookup:
    """For build, verify and doctor: the installed vLLM + transformers pair against
    `envkit compat` (cached per pair; an unreadable index is said, not a verdict)."""
    from envkit.compat.checker import Checker
    from envkit.compat.enforcement import lookup
    from envkit.index.wheels import index_url

    return lookup(Checker(index_url(index), progress=render.progress))
