"""The command line: parses, calls the core, hands results to render. Decides nothing.

Exit codes: 0 ok, 1 a check (or resolve, install, build) failed, 2 bad input or
configuration, 130 interrupted. Only :func:`main` ends the process.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import click
from packaging.version import Version

from . import __version__, lockstate, modelcheck, process, render, serverprobe
from . import doctor as doctor_module
from . import plan as memplan
from .build import BuildOptions
from .build import build as run_build
from .catalog import envs_dir, list_profiles, resolve_profile
from .errors import (
    EXIT_BAD_INPUT,
    EXIT_CHECK_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    BadInput,
    EnvkitError,
)
from .lockmatrix import Locker, LockOptions
from .modelcheck import load_model_config
from .profile import NAME_RE, Profile, load_profile
from .profile_write import draft, update_models, write_new_profile
from .registry_scan import Scanner, parse_target, releases_listing
from .uvtool import Uv
from .venvslot import VenvSlot
from .verify import verify as run_verify
from .wheelfetch import index_url

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class State:
    envs: str | None = None
    json: bool = False


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


def torch_index_option(func: F) -> F:
    return click.option(
        "--torch-index",
        metavar="default|URL",
        envvar="ENVKIT_TORCH_INDEX",
        help="Where torch comes from: 'default' takes it from the default index, a URL "
        "uses a PyTorch index mirror ('{backend}' is substituted). Verification still "
        "demands the profile's CUDA. [env: ENVKIT_TORCH_INDEX]",
    )(func)


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
@click.pass_obj
def cli(state: State, envs: str | None) -> None:
    """envkit: declarative, verified vLLM environments built with uv."""
    state.envs = envs


@cli.command()
@json_option
@click.pass_obj
def profiles(state: State, as_json: bool) -> int:
    """List the profiles in the profiles folder."""
    listing = list_profiles(envs_dir(state.envs))
    render.profiles(listing, as_json)
    return EXIT_BAD_INPUT if listing.errors else EXIT_OK


@cli.command()
@click.argument("profile")
@json_option
@click.pass_obj
def show(state: State, profile: str, as_json: bool) -> int:
    """Show one profile: pins, torch backend, checks, supported models."""
    render.show(resolve_profile(profile, envs_dir(state.envs)), as_json)
    return EXIT_OK


@cli.command()
@click.argument("profile")
@venv_option
@click.option(
    "--python",
    "python",
    metavar="PATH_OR_VERSION",
    help="Interpreter to build with: a path, or a version that must also fit the profile.",
)
@click.option(
    "--torch-backend",
    metavar="NAME",
    help="Override the profile's torch backend (cpu, cu124, ...); verification then "
    "demands that backend's CUDA.",
)
@torch_index_option
@click.option("--index-url", metavar="URL", help="The default package index for uv.")
@click.option(
    "--no-lock",
    is_flag=True,
    help="Resolve afresh even when a lock of this machine's cell is published.",
)
@constraints_option
@json_option
@click.pass_obj
def build(
    state: State,
    profile: str,
    venv: Path,
    python: str | None,
    torch_backend: str | None,
    torch_index: str | None,
    index_url: str | None,
    no_lock: bool,
    constraints: str | None,
    as_json: bool,
) -> int:
    """Recreate the venv from PROFILE with uv, verify it, then swap it in.

    The new environment is built aside and verified; only then does it replace the one at
    --venv. A failed, interrupted or killed build leaves the previous environment in place.
    """
    loaded = resolve_profile(profile, envs_dir(state.envs))
    options = BuildOptions(
        venv=venv,
        python=python,
        torch_backend=torch_backend,
        torch_index=torch_index,
        index_url=index_url,
        stream=not as_json and sys.stderr.isatty(),
        use_lock=not no_lock,
        constraints=constraints,
    )
    result = run_build(loaded, options, progress=render.progress)
    render.build(result, as_json)
    return EXIT_OK if result.ok else EXIT_CHECK_FAILED


@cli.command()
@click.argument("profile")
@venv_option
@json_option
@click.pass_obj
def verify(state: State, profile: str, venv: Path, as_json: bool) -> int:
    """Check an existing venv against PROFILE: versions, imports, probes, torch CUDA."""
    loaded = resolve_profile(profile, envs_dir(state.envs))
    slot = VenvSlot(venv)
    with slot.locked(render.progress) as recovered:
        for note in recovered:
            render.progress(f"recovered: {note}")
        report = run_verify(loaded, slot.venv)
    render.report(report, as_json)
    return EXIT_OK if report.ok else EXIT_CHECK_FAILED


def index_option(func: F) -> F:
    return click.option(
        "--index-url",
        "index",
        metavar="URL",
        help="Package index to read wheels from [default: $UV_DEFAULT_INDEX, $UV_INDEX_URL, "
        "$PIP_INDEX_URL, or PyPI].",
    )(func)


def _shipped(state: State) -> list[Profile]:
    folder = envs_dir(state.envs)
    return list(list_profiles(folder).profiles) if folder.is_dir() else []


def _model_report(state: State, profile: Profile | None, model: str, index: str | None) -> int:
    config = load_model_config(model)
    scanner = Scanner(index_url(index))
    report = modelcheck.report(
        config, profile, _shipped(state), lambda arch: releases_listing(scanner, arch)
    )
    render.model_report(report, state.json)
    return EXIT_OK if report.ok else EXIT_CHECK_FAILED


@cli.command("check-model")
@click.argument("profile")
@click.argument("model")
@index_option
@json_option
@click.pass_obj
def check_model(state: State, profile: str, model: str, index: str | None, as_json: bool) -> int:
    """Can PROFILE load MODEL (a folder, a config.json, or a Hub repo id)?

    Decided from config.json before anything is installed: the model type must be known to
    the pinned transformers or configured by the pinned vLLM, and an architecture must be in
    the pinned vLLM's registry. Exit 0 loadable, 1 not, 2 bad input.
    """
    loaded = resolve_profile(profile, envs_dir(state.envs))
    return _model_report(state, loaded, model, index)


@cli.command()
@click.argument("model")
@index_option
@json_option
@click.pass_obj
def which(state: State, model: str, index: str | None, as_json: bool) -> int:
    """Every shipped profile's verdict on MODEL, loadable first."""
    return _model_report(state, None, model, index)


@cli.command()
@click.argument("target", required=False)
@click.option(
    "--update",
    "update",
    metavar="PROFILE",
    help="Rewrite PROFILE's [models] table from scans of its vllm and transformers pins.",
)
@click.option("--no-cache", is_flag=True, help="Read the wheel again even if scanned before.")
@index_option
@json_option
@click.pass_obj
def scan(
    state: State,
    target: str | None,
    update: str | None,
    no_cache: bool,
    index: str | None,
    as_json: bool,
) -> int:
    """Read what a release can load from its published wheel: vllm==X or transformers==Y.

    Only the needed files are read (HTTP range requests); the source is parsed, never run.
    """
    scanner = Scanner(index_url(index), use_cache=not no_cache)
    if update:
        if target:
            raise BadInput("Give either TARGET or --update PROFILE, not both.")
        profile = resolve_profile(update, envs_dir(state.envs))
        pins = profile.expected_versions()
        missing = [n for n in ("vllm", "transformers") if n not in pins]
        if missing:
            raise BadInput(
                f"Profile {profile.name} pins no exact {' or '.join(missing)} version.",
                "Pin vllm==X in requirements and transformers==Y in constraints.",
            )
        vllm = scanner.scan("vllm", Version(pins["vllm"]))
        transformers = scanner.scan("transformers", Version(pins["transformers"]))
        update_models(profile.path, vllm, transformers)
        render.scans([vllm, transformers], as_json, updated=str(profile.path))
        return EXIT_OK
    if not target:
        raise BadInput("Nothing to scan.", "Give vllm==X or transformers==Y, or --update PROFILE.")
    project, version = parse_target(target)
    render.scans([scanner.scan(project, version)], as_json)
    return EXIT_OK


@cli.command("new-profile")
@click.argument("name")
@click.option(
    "--for-model",
    "model",
    required=True,
    metavar="MODEL",
    help="The model (folder, config.json or repo id) the profile must load.",
)
@click.option(
    "--vllm",
    "vllm_version",
    metavar="VERSION",
    help="Draft for this vLLM release instead of the newest that lists the model.",
)
@click.option("--force", is_flag=True, help="Replace an existing profile of that name.")
@index_option
@json_option
@click.pass_obj
def new_profile(
    state: State,
    name: str,
    model: str,
    vllm_version: str | None,
    force: bool,
    index: str | None,
    as_json: bool,
) -> int:
    """Draft envs/NAME.toml for the newest vLLM release that lists MODEL's architecture.

    Pins come from that release's requirements: its torch, and the newest transformers it
    allows that was published before it and knows the model type.
    """
    if not NAME_RE.fullmatch(name):
        raise BadInput(f"{name!r} is not a profile name: letters, digits, '.', '_', '+', '-'.")
    config = load_model_config(model)
    scanner = Scanner(index_url(index))
    listing = next(
        (found for arch in config.architectures if (found := releases_listing(scanner, arch))),
        None,
    )
    if listing is None:
        raise BadInput(
            f"No published vLLM release lists {' or '.join(config.architectures) or 'it'}.",
            "A profile cannot be drafted for a model no vLLM release supports.",
        )
    if vllm_version:
        _p, wanted = parse_target(f"vllm=={vllm_version}")
        if not (Version(listing.first) <= wanted <= Version(listing.newest)):
            raise BadInput(
                f"vLLM {wanted} does not list {listing.architecture} "
                f"(vLLM {listing.first} through {listing.newest} do).",
                "Pick a release in that range, or leave out --vllm.",
            )
        listing = dataclasses.replace(listing, newest=str(wanted))
    path = envs_dir(state.envs) / f"{name}.toml"
    text = draft(name, config.model_type, listing, scanner)
    write_new_profile(path, text, force=force)
    profile = load_profile(path)
    render.drafted(profile, listing.architecture, as_json)
    return EXIT_OK


def _profiles(state: State, names: tuple[str, ...], every: bool) -> list[Profile]:
    folder = envs_dir(state.envs)
    if every == bool(names):
        raise BadInput("Name the profiles, or pass --all (not both).")
    if every:
        listing = list_profiles(folder)
        if listing.errors:
            raise listing.errors[0]
        return list(listing.profiles)
    return [resolve_profile(name, folder) for name in names]


@cli.command()
@click.argument("profiles", nargs=-1)
@click.option("--all", "every", is_flag=True, help="Every profile in the profiles folder.")
@click.option("--cell", metavar="CELL", help="Only this cell (e.g. py3.12-linux-x86_64-cu124).")
@click.option(
    "--jobs",
    type=click.IntRange(1, 64),
    default=4,
    show_default=True,
    help="Cells resolved at once.",
)
@click.option(
    "--check", is_flag=True, help="Change nothing: exit 1 naming every stale or missing cell."
)
@click.option("--resolve", is_flag=True, help="With --check: also resolve every cell again.")
@click.option(
    "--refresh",
    is_flag=True,
    help="Ask the index even where uv's cache could answer (profiles with exclude_newer "
    "otherwise resolve from the cache first).",
)
@torch_index_option
@index_option
@constraints_option
@json_option
@click.pass_obj
def lock(
    state: State,
    profiles: tuple[str, ...],
    every: bool,
    cell: str | None,
    jobs: int,
    check: bool,
    resolve: bool,
    refresh: bool,
    torch_index: str | None,
    index: str | None,
    constraints: str | None,
    as_json: bool,
) -> int:
    """Resolve every cell of each profile (Python x platform x torch backend) with hashes.

    Writes constraints/<profile>/<cell>.txt and a PEP 751 pylock beside it.
    """
    chosen = _profiles(state, profiles, every)
    if torch_index and torch_index != "default" and "://" not in torch_index:
        raise BadInput(f"--torch-index {torch_index!r} is neither 'default' nor a URL.")
    locker = Locker(
        Uv(),
        LockOptions(
            torch_index=torch_index,
            index_url=index,
            jobs=jobs,
            root=constraints,
            refresh=refresh or resolve,
        ),
        render.progress,
    )
    if check:
        found = lockstate.check(chosen, constraints, locker if resolve else None)
        render.lock_check(found, as_json)
        return EXIT_CHECK_FAILED if any(s.state in ("stale", "missing") for s in found) else EXIT_OK
    if resolve:
        raise BadInput("--resolve goes with --check.")
    results = locker.lock(chosen, only=cell)
    render.lock_results(results, as_json)
    return EXIT_CHECK_FAILED if any(r.state == "unresolvable" for r in results) else EXIT_OK


@cli.command()
@click.argument("profile", required=False)
@click.option(
    "--github",
    is_flag=True,
    help='Print a GitHub Actions strategy.matrix object: {"include": [...]}.',
)
@constraints_option
@json_option
@click.pass_obj
def matrix(
    state: State, profile: str | None, github: bool, constraints: str | None, as_json: bool
) -> int:
    """The lock cells of one profile (or all) and their state."""
    chosen = _profiles(state, (profile,) if profile else (), not profile)
    found = [s for p in chosen for s in lockstate.states(p, constraints)]
    if github:
        render.github_matrix(found)
    else:
        render.matrix(found, as_json)
    return EXIT_OK


@cli.command()
@click.argument("profiles", nargs=-1)
@click.option("--all", "every", is_flag=True, help="Every profile in the profiles folder.")
@click.option(
    "--to",
    "to",
    type=click.Path(path_type=Path),
    metavar="DIR",
    help="Publish into DIR instead of the constraints folder itself.",
)
@constraints_option
@json_option
@click.pass_obj
def publish(
    state: State,
    profiles: tuple[str, ...],
    every: bool,
    to: Path | None,
    constraints: str | None,
    as_json: bool,
) -> int:
    """Write the locked cells and constraints/index.json (file, sha256, digest), atomically."""
    result = lockstate.publish(_profiles(state, profiles, every), constraints, to)
    render.published(result, as_json)
    return EXIT_OK


@cli.command()
@click.argument("profile")
@click.argument("model")
@click.option("--gpu-memory", required=True, metavar="SIZE", help="The GPU's memory: 8GiB, 24GB.")
@click.option("--free", metavar="SIZE", help="Memory free on the GPU before vLLM starts.")
@click.option(
    "--gpu-memory-utilization",
    "utilization",
    type=float,
    default=0.9,
    show_default=True,
    help="vLLM's share of the GPU's total memory.",
)
@click.option("--max-model-len", type=click.IntRange(1), help="Context length to plan for.")
@click.option(
    "--dtype",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "float16", "half", "bfloat16", "float32"]),
)
@click.option(
    "--kv-cache-dtype",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "fp8", "fp8_e4m3", "fp8_e5m2"]),
)
@click.option(
    "--reserve",
    default="1GiB",
    show_default=True,
    metavar="SIZE",
    help="Activation peak and CUDA graphs, outside weights and KV cache.",
)
@click.option("--compose", is_flag=True, help="Also print a docker-compose service.")
@json_option
@click.pass_obj
def plan(
    state: State,
    profile: str,
    model: str,
    gpu_memory: str,
    free: str | None,
    utilization: float,
    max_model_len: int | None,
    dtype: str,
    kv_cache_dtype: str,
    reserve: str,
    compose: bool,
    as_json: bool,
) -> int:
    """Will MODEL fit this GPU with PROFILE's vLLM? Memory, context, images, command.

    Exit 0 when it fits as asked, 1 when not (with the recommendation), 2 on bad input.
    """
    loaded = resolve_profile(profile, envs_dir(state.envs))
    config = load_model_config(model)
    folder = Path(model) if Path(model).is_dir() else Path(model).parent
    inp = memplan.PlanInput(
        model=folder,
        gpu_memory=memplan.parse_size(gpu_memory, "--gpu-memory"),
        free=memplan.parse_size(free, "--free") if free else None,
        utilization=utilization,
        max_model_len=max_model_len,
        dtype=dtype,
        kv_cache_dtype=kv_cache_dtype,
        reserve=memplan.parse_size(reserve, "--reserve"),
    )
    result = memplan.make_plan(config.raw, folder, model, inp)
    verdict = modelcheck.judge(loaded, config)
    extra = (
        memplan.compose(model, result.recommended, loaded.models.vllm)
        if (compose and result.command)
        else ""
    )
    render.plan(result, verdict, extra, as_json)
    return EXIT_OK if result.ok else EXIT_CHECK_FAILED


@cli.command()
@click.argument("base_url")
@click.option("--model", "model", metavar="M", help="Model to ask (default: the first listed).")
@click.option(
    "--api-key-env",
    metavar="VAR",
    help="Environment variable holding the API key (read, sent, never printed).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(0.1),
    default=30.0,
    show_default=True,
    help="Seconds to wait for each answer.",
)
@json_option
@click.pass_obj
def probe(
    state: State,
    base_url: str,
    model: str | None,
    api_key_env: str | None,
    timeout: float,
    as_json: bool,
) -> int:
    """Check a running OpenAI-compatible server: GET /models, then a 16-token chat.

    When BASE_URL fails, the usual mistakes are tried (missing or doubled /v1, an endpoint
    given as the base) and the base URL that works is named. Exit 0 when the chat answers.
    """
    result = serverprobe.probe(base_url, model=model, key_env=api_key_env, timeout=timeout)
    render.probe(result, as_json)
    return EXIT_OK if result.ok else EXIT_CHECK_FAILED


@cli.command()
@click.option(
    "--venv",
    type=click.Path(path_type=Path),
    help="The venv to inspect [default: $VIRTUAL_ENV, ./.venv, python3 on PATH].",
)
@click.option("--profile", "profile", metavar="PROFILE", help="Also report drift from PROFILE.")
@json_option
@click.pass_obj
def doctor(state: State, venv: Path | None, profile: str | None, as_json: bool) -> int:
    """Inspect an environment and this machine without changing them.

    Duplicate copies and their installers, drift from a profile, known-bad vLLM and
    transformers pairs, torch's CUDA against the driver, WSL2, GPUs without bfloat16, old
    hf-xet. Secrets in the environment are redacted. Exit 1 when an error is found.
    """
    loaded = resolve_profile(profile, envs_dir(state.envs)) if profile else None
    diagnosis = doctor_module.diagnose(venv, loaded)
    render.diagnosis(diagnosis, as_json)
    return EXIT_OK if diagnosis.ok else EXIT_CHECK_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (``sys.exit`` happens only in ``__main__``)."""
    state = State()
    restore = process.install_signal_handlers()
    try:
        code = cli.main(
            args=list(argv) if argv is not None else None,
            obj=state,
            standalone_mode=False,
            prog_name="envkit",
        )
        return int(code) if isinstance(code, int) else EXIT_OK
    except EnvkitError as exc:
        render.error(exc, state.json)
        return exc.exit_code
    except click.exceptions.Abort:
        render.interrupted(state.json)
        return EXIT_INTERRUPTED
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        render.interrupted(state.json)
        return EXIT_INTERRUPTED
    finally:
        restore()


def run() -> None:
    sys.exit(main())
