"""Options and state shared by the commands: each defined once, checked where it enters."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from click.core import ParameterSource

from envkit import render
from envkit.errors import EXIT_BAD_INPUT
from envkit.io.escaping import visible

if TYPE_CHECKING:
    import click.shell_completion  # (loaded by click itself when a shell completes)

    from envkit.compat.check.checker import Checker
    from envkit.env.checks import CompatLookup
    from envkit.gpu.arch import Capability
    from envkit.gpu.cards import Card
    from envkit.gpu.driver import DriverVersion
    from envkit.gpu.installed.detect import Choice
    from envkit.serving.command import MmKwargs, MmLimits
    from envkit.serving.plan.planning import Gpu, Settings

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


def _checked_torch_index(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """The one place --torch-index (or $ENVKIT_TORCH_INDEX) is parsed: a TorchIndex; a bad
    value's message names where it came from."""
    from envkit.lock.torchsource import TorchIndex

    from_env = param.name and ctx.get_parameter_source(param.name) is ParameterSource.ENVIRONMENT
    return TorchIndex.parse(value, "ENVKIT_TORCH_INDEX" if from_env else "--torch-index")


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
    import click.shell_completion

    from envkit.profiles.catalog import Catalog

    state = ctx.find_object(State)
    try:
        listing = Catalog.from_option(state.envs if state else None).list()
    except Exception:
        return []
    return [
        # the shell prints the help beside the name: no control character of it may act
        click.shell_completion.CompletionItem(p.name, help=visible(p.description.split("\n")[0]))
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
    from envkit.compat.check.enforcement import cached_first
    from envkit.io.urls import index_url

    url = index_url(index)

    def checker() -> Checker:
        from envkit.compat.check.checker import Checker

        return Checker(url, progress=render.progress)

    return cached_first(url, checker)


GPU_HELP = "A known card (rtx-4060, rtx-4090-laptop, h100-80gb, t4, ...): its compute capability."
CAPABILITY_HELP = "The GPU's compute capability (nvidia-smi's compute_cap: 8.6, sm_86) [or --gpu]."
DRIVER_HELP = "The NVIDIA driver version the GPU machine has (e.g. 550.54.14)."


# One parser per kind of option value, for every command that takes it: a bad value is the
# same BadInput, naming the option, wherever it is given.
def parse_card(ctx: click.Context, _param: click.Parameter, value: str | None) -> Card | None:
    """--gpu: a card envkit knows (:func:`envkit.gpu.cards.card`), by key or NVIDIA's name.
    An unknown card's hint names what this command takes instead, and only that."""
    if value is None:
        return None  # the card table is not read for a command run without --gpu
    from envkit.errors import BadInput
    from envkit.gpu.cards import card

    try:
        return card(value)
    except BadInput as exc:
        has = {opt for p in ctx.command.params for opt in p.opts}
        instead = [
            o for o in ("--compute-capability X.Y", "--gpu-memory SIZE") if o.split()[0] in has
        ]
        if not instead:
            raise
        raise BadInput(exc.message, f"{exc.hint} Or give {' and '.join(instead)}.") from None


def parse_capability(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> Capability | None:
    """--compute-capability: ``8.6``, ``12.0``, ``sm_86`` or ``86``."""
    from envkit.gpu.arch import Capability

    return Capability.parse(value, "--compute-capability") if value is not None else None


def parse_driver(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> DriverVersion | None:
    """--driver: ``550.54.14``."""
    if value is None:
        return None
    from envkit.gpu.driver import DriverVersion

    return DriverVersion.parse(value, "--driver")


def size_parser(
    *, allow_zero: bool = False
) -> Callable[[click.Context, click.Parameter, str | None], int | None]:
    """A size with a unit (``8GiB``, ``6.98GiB``, ``24GB``) for the option it is given to."""

    def parse(_ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
        from envkit.gpu.cards import parse_size

        name = param.opts[0] if param.opts else "size"
        return parse_size(value, name, allow_zero=allow_zero) if value is not None else None

    return parse


def parse_mm_limits(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> MmLimits | None:
    """--limit-mm-per-prompt: items per prompt, as vLLM takes it ('{"image": 2}')."""
    from envkit.serving.command import MmLimits

    return MmLimits.parse(value) if value is not None else None


def parse_mm_kwargs(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> MmKwargs | None:
    """--mm-processor-kwargs: the processor's overrides, as vLLM takes them."""
    from envkit.serving.command import MmKwargs

    return MmKwargs.parse(value) if value is not None else None


def gpu_target_options(func: F) -> F:
    """The GPU a command checks for: --gpu, --compute-capability, --driver; with none of
    them, nvidia-smi's (see :func:`gpu_choice`)."""
    options = [
        click.option("--gpu", "gpu_name", metavar="NAME", callback=parse_card, help=GPU_HELP),
        click.option(
            "--compute-capability", metavar="X.Y", callback=parse_capability, help=CAPABILITY_HELP
        ),
        click.option(
            "--driver", "driver", metavar="VERSION", callback=parse_driver, help=DRIVER_HELP
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def gpu_choice(values: dict[str, Any], *, ask: bool = True, driver_alone: bool = False) -> Choice:
    """Take :func:`gpu_target_options`' values out of ``values`` and decide the target
    (BadInput naming a bad option); with none given, nvidia-smi's GPU (when ``ask``)."""
    from envkit.gpu.installed.detect import choose

    return choose(
        values.pop("gpu_name"), values.pop("compute_capability"), values.pop("driver"),
        ask=ask, driver_alone=driver_alone,
    )  # fmt: skip


def plan_options(func: F) -> F:
    """The GPU and the vLLM settings a memory plan takes (``plan``, ``serve``)."""
    options = [
        click.option(
            "--gpu",
            "gpu_name",
            metavar="NAME",
            callback=parse_card,
            help="A known card (rtx-4060, rtx-3080-laptop-16gb, t4, a100-80gb, ...).",
        ),
        click.option(
            "--gpu-memory",
            metavar="SIZE",
            callback=size_parser(),
            help="The GPU's memory, with a unit: 8GiB, 24GB.",
        ),
        click.option(
            "--compute-capability",
            metavar="X.Y",
            callback=parse_capability,
            help="The card's compute capability: 7.5, sm_86 (below 8.0: no bfloat16) [or --gpu].",
        ),
        click.option(
            "--driver", "driver", metavar="VERSION", callback=parse_driver, help=DRIVER_HELP
        ),
        click.option(
            "--free",
            metavar="SIZE",
            callback=size_parser(),
            help="Memory free on the GPU before vLLM starts (nvidia-smi --query-gpu="
            "memory.free --format=csv) [default: the whole card].",
        ),
        click.option(
            "--gpu-memory-utilization",
            "utilization",
            type=float,
            default=0.9,
            show_default=True,
            help="vLLM's share of the GPU's total memory.",
        ),
        click.option("--max-model-len", type=click.IntRange(1), help="Context length to plan for."),
        click.option(
            "--dtype",
            default="auto",
            show_default=True,
            type=click.Choice(["auto", "float16", "half", "bfloat16", "float32"]),
        ),
        click.option(
            "--kv-cache-dtype",
            default="auto",
            show_default=True,
            type=click.Choice(["auto", "fp8", "fp8_e4m3", "fp8_e5m2"]),
        ),
        click.option(
            "--reserve",
            default="1GiB",
            show_default=True,
            metavar="SIZE",
            callback=size_parser(allow_zero=True),
            help="Activation peak and CUDA graphs, outside weights and KV cache.",
        ),
        click.option(
            "--limit-mm-per-prompt",
            "mm_limits",
            metavar="JSON",
            callback=parse_mm_limits,
            help="Items per prompt for each modality, as vLLM takes it: '{\"image\": 2}' "
            "(0 turns a modality off) [default: vLLM's].",
        ),
        click.option(
            "--mm-processor-kwargs",
            "mm_kwargs",
            metavar="JSON",
            callback=parse_mm_kwargs,
            help="The processor's overrides, as vLLM takes them: '{\"max_pixels\": 524288}' "
            "(images are profiled at max_pixels).",
        ),
        revision_option,
    ]
    for option in reversed(options):
        func = option(func)
    return func


@dataclass(frozen=True)
class PlanOptions:
    """What :func:`plan_options` parsed: the GPU (None when no option names one) and the
    settings, with the names of those the user gave (the rest are defaults)."""

    gpu: Gpu | None
    settings: Settings
    given: frozenset[str]
    target: Choice  # the GPU its kernels must run on (from --gpu/--compute-capability/--driver)


PLAN_KEYS = (
    "gpu_name",
    "gpu_memory",
    "compute_capability",
    "driver",
    "free",
    "utilization",
    "max_model_len",
    "dtype",
    "kv_cache_dtype",
    "reserve",
    "mm_limits",
    "mm_kwargs",
    "revision",
)


def plan_values(ctx: click.Context, values: dict[str, Any]) -> PlanOptions:
    """Take :func:`plan_options`' values out of ``values`` (a command's keyword arguments)
    and check them: sizes, the card, the capability (BadInput naming the option)."""
    from envkit.gpu.installed.detect import choose
    from envkit.serving.plan.planning import Settings, gpu_from_options

    raw = {key: values.pop(key) for key in PLAN_KEYS}
    given = frozenset(
        key
        for key in PLAN_KEYS
        if ctx.get_parameter_source(key) is not click.core.ParameterSource.DEFAULT
    )
    gpu = gpu_from_options(
        raw["gpu_name"], raw["gpu_memory"], raw["free"], raw["compute_capability"]
    )
    settings = Settings(
        utilization=finite(raw["utilization"], "--gpu-memory-utilization"),
        max_model_len=raw["max_model_len"],
        dtype=raw["dtype"],
        kv_cache_dtype=raw["kv_cache_dtype"],
        reserve=raw["reserve"],
        mm_limits=raw["mm_limits"],
        mm_kwargs=raw["mm_kwargs"],
        revision=raw["revision"],
    )
    target = choose(raw["gpu_name"], raw["compute_capability"], raw["driver"], ask=False)
    return PlanOptions(gpu, settings, given, target)
