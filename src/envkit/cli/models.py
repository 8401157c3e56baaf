"""CLI commands for model knowledge: check-model, which, scan, new-profile."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from packaging.version import Version

from envkit import render
from envkit.cli.options import (
    State,
    complete_profiles,
    gpu_choice,
    gpu_target_options,
    index_url_option,
    json_option,
    revision_option,
)
from envkit.errors import EXIT_CHECK_FAILED, EXIT_OK, BadInput
from envkit.profiles.catalog import Catalog

if TYPE_CHECKING:
    from envkit.gpu.installed.detect import Choice
    from envkit.profiles.profile import Profile

# Core modules are imported inside the commands that use them: each command loads only its own.


def _shipped(state: State) -> list[Profile]:
    """Every profile on the search path (./envs, the user's, envkit's own)."""
    try:
        listing = Catalog.from_option(state.envs).list()
    except BadInput:
        return []  # no profiles folder at all: the verdict is about the model alone
    render.broken_profiles(listing.errors)  # named on stderr; the verdicts use the others
    return list(listing.profiles)


def _model_report(
    state: State,
    profile: Profile | None,
    model: str,
    index: str | None,
    revision: str | None,
    target: Choice,
) -> int:
    from envkit.models.checking import check

    report = check(
        model, profile, lambda: _shipped(state), index=index, revision=revision, target=target,
        progress=render.progress,
    )  # fmt: skip
    render.model_report(report, state.json)
    return EXIT_OK if report.ok else EXIT_CHECK_FAILED


@click.command("check-model")
@click.argument("profile", shell_complete=complete_profiles)
@click.argument("model")
@index_url_option
@revision_option
@gpu_target_options
@json_option
@click.pass_obj
def check_model(
    state: State,
    /,
    profile: str,
    model: str,
    index: str | None,
    revision: str | None,
    as_json: bool,
    **target: Any,
) -> int:
    """Can PROFILE load MODEL (a folder, a config.json, or a Hub repo id)?

    Decided from config.json before anything is installed: the model type must be known to
    the pinned transformers or configured by the pinned vLLM, and an architecture must be in
    the pinned vLLM's registry. With a GPU (--gpu, --compute-capability, else nvidia-smi's),
    the pinned vLLM and torch builds must also have kernels for it (envkit's table of the
    published wheels). Exit 0 loadable, 1 not, 2 bad input.
    """
    loaded = Catalog.from_option(state.envs).resolve(profile)
    return _model_report(state, loaded, model, index, revision, gpu_choice(target))


@click.command()
@click.argument("model")
@index_url_option
@revision_option
@gpu_target_options
@json_option
@click.pass_obj
def which(
    state: State,
    /,
    model: str,
    index: str | None,
    revision: str | None,
    as_json: bool,
    **target: Any,
) -> int:
    """Every shipped profile's verdict on MODEL, loadable first (with a GPU: --gpu,
    --compute-capability, else nvidia-smi's, only profiles whose builds have its kernels)."""
    return _model_report(state, None, model, index, revision, gpu_choice(target))


@click.command()
@click.argument("target", required=False)
@click.option(
    "--update",
    "update",
    shell_complete=complete_profiles,
    metavar="PROFILE",
    help="Rewrite PROFILE's [models] table from scans of its vllm and transformers pins.",
)
@click.option("--no-cache", is_flag=True, help="Read the wheel again even if scanned before.")
@index_url_option
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
    from envkit.io.urls import index_url
    from envkit.models.drafts import rescan
    from envkit.releases.registry import Scanner, parse_target
    from envkit.releases.testregistry import scan_release

    scanner = Scanner(index_url(index), use_cache=not no_cache, progress=render.progress)
    if update:
        if target:
            raise BadInput("Give either TARGET or --update PROFILE, not both.")
        profile = Catalog.from_option(state.envs).resolve(update)
        render.scans(list(rescan(profile, scanner)), as_json, updated=str(profile.path))
        return EXIT_OK
    if not target:
        raise BadInput("Nothing to scan.", "Give vllm==X or transformers==Y, or --update PROFILE.")
    project, version = parse_target(target)
    render.scans([scan_release(scanner, project, version)], as_json)
    return EXIT_OK


@click.command("new-profile")
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
@click.option(
    "--python",
    "python",
    metavar="X.Y",
    callback=lambda _c, _p, v: _minor(v, "--python"),
    help="The Python the environment will use (vLLM releases that refuse it are skipped).",
)
@click.option(
    "--cuda",
    "cuda",
    metavar="X.Y",
    callback=lambda _c, _p, v: _minor(v, "--cuda"),
    help="The highest CUDA the GPU driver runs [default: from nvidia-smi, when present].",
)
@click.option(
    "--platform",
    type=click.Choice(["linux-x86_64", "linux-aarch64"]),
    help="The host the environment is for: its vLLM must publish a wheel for it [default: the "
    "--gpu card's (GH200, GB200, GB10: linux-aarch64), else this machine's].",
)
@click.option("--force", is_flag=True, help="Replace an existing profile of that name.")
@index_url_option
@revision_option
@gpu_target_options
@json_option
@click.pass_obj
def new_profile(
    state: State,
    /,
    name: str,
    model: str,
    vllm_version: str | None,
    python: str | None,
    cuda: str | None,
    platform: str | None,
    force: bool,
    index: str | None,
    revision: str | None,
    as_json: bool,
    **target: Any,
) -> int:
    """Draft NAME.toml (in ./envs, else your profile folder): the newest vLLM + transformers
    that load MODEL, solved.

    vLLM must list the architecture, accept --python, have kernels (with its torch's default
    build) for the GPU (--gpu, --compute-capability, else nvidia-smi's) and pin a torch with a
    CUDA build the driver runs (--cuda, --driver, or nvidia-smi); transformers must be in
    vLLM's range, published before it, within vLLM's own bound for the architecture, know the
    model type and pass `envkit compat`. The output says why newer candidates were rejected.
    """
    from envkit.compat.check.checker import Checker
    from envkit.gpu.installed.detect import driver_cuda
    from envkit.gpu.target import host_platform
    from envkit.io.urls import index_url
    from envkit.models.check_model import load_model_config
    from envkit.models.drafts import draft_for_model
    from envkit.profiles.profile import NAME_RE
    from envkit.releases.registry import Scanner

    if not NAME_RE.fullmatch(name):  # before any network: the name makes the path
        raise BadInput(f"{name!r} is not a profile name: letters, digits, '.', '_', '+', '-'.")
    chosen = gpu_choice(target, driver_alone=True)  # before any network, like the name
    config = load_model_config(model, revision=revision)
    driver = driver_cuda(cuda, chosen)
    scanner = Scanner(index_url(index), progress=render.progress)
    checker = Checker(scanner.index, http=scanner.http, progress=render.progress)
    path = Catalog.from_option(state.envs).writable() / f"{name}.toml"
    profile, found = draft_for_model(
        path, config, scanner, checker,
        vllm_version=vllm_version, python=python, cuda=driver, force=force,
        gpu=chosen.target.capability if chosen.target is not None else None,
        platform=platform or (chosen.target.platform if chosen.target else host_platform()),
    )  # fmt: skip
    from envkit.gpu.needs import for_profile
    from envkit.lock.place import place

    need = for_profile(profile)
    render.drafted(profile, found, driver or "", need, place(profile).locks, as_json)
    return EXIT_OK


def _minor(value: str | None, option: str) -> str | None:
    if value is not None and not re.fullmatch(r"[0-9]{1,2}\.[0-9]{1,2}", value):
        raise click.BadParameter(f"{value!r} is not a version such as 3.12", param_hint=option)
    return value


ARCH_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")  # a class name, not a path


@click.command()
@click.argument("target", metavar="ARCH|MODEL_TYPE|MODEL")
@index_url_option
@revision_option
@json_option
@click.pass_obj
def history(
    state: State, target: str, index: str | None, revision: str | None, as_json: bool
) -> int:
    """Every published vLLM release's word on an architecture (or a model's, or those that
    serve a model type such as qwen3_5).

    Listed or not, dropped, moved to a plugin, the transformers range each release declares,
    and the shipped profiles that can load it. Each release is read once from its wheel and
    cached. Exit 0 when some release lists it, 1 when none does, 2 on bad input.
    """
    from envkit.io.urls import index_url
    from envkit.models import history as hist
    from envkit.models.check_model import load_model_config
    from envkit.releases.modeltypes import MODEL_TYPE
    from envkit.releases.registry import Scanner

    scanner = Scanner(index_url(index), progress=render.progress)
    if MODEL_TYPE.fullmatch(target) and not Path(target).exists():  # qwen3_5, not a class
        typed = hist.of_model_type(target, scanner, _shipped(state))
        render.histories(None, list(typed.histories), as_json, of_type=typed)
        return EXIT_OK if any(h.listed for h in typed.histories) else EXIT_CHECK_FAILED
    archs: tuple[str, ...]
    model: str | None
    if ARCH_RE.fullmatch(target) and not Path(target).exists():
        model, archs = None, (target,)
    else:
        config = load_model_config(target, revision=revision)
        model, archs = config.source, config.architectures
        if not archs:
            raise BadInput(
                f"{config.source} names no architectures.", "Give one: envkit history ARCH."
            )
    shipped = _shipped(state)
    found = [hist.history(arch, scanner, shipped) for arch in archs]
    render.histories(model, found, as_json)
    return EXIT_OK if any(h.listed for h in found) else EXIT_CHECK_FAILED


@click.command()
@click.argument("targets", nargs=-1, required=True, metavar="vllm==X transformers==Y | PROFILE")
@click.option("--no-cache", is_flag=True, help="Read the wheels again even if checked before.")
@click.option(
    "--removed-in",
    "removed_in",
    is_flag=True,
    help="Also find the transformers release that removed each finding's subject "
    "(bisects the releases in between: a few more wheels are read).",
)
@index_url_option
@json_option
@click.pass_obj
def compat(
    state: State,
    targets: tuple[str, ...],
    no_cache: bool,
    removed_in: bool,
    index: str | None,
    as_json: bool,
) -> int:
    """Does vLLM X run with transformers Y? Decided from the two published wheels.

    Lists every transformers module, name and class attribute vLLM X uses that Y lacks, with
    where vLLM uses it. A finding in a model's own source names the architectures it breaks;
    the pair stays usable for the others. Give the two pins, or a PROFILE to check its pins.
    Exit 0 compatible, 1 not, 2 bad input.
    """
    from envkit.compat.report import load_cached
    from envkit.io.urls import index_url

    vllm, transformers = _pair(state, targets)
    url = index_url(index)
    cached = None if no_cache or removed_in else load_cached(vllm, transformers, url)
    if cached is not None:  # the checker's own first look, without loading the checker
        render.compat(cached, as_json)
        return EXIT_OK if cached.compatible else EXIT_CHECK_FAILED
    from envkit.compat.check.checker import Checker

    checker = Checker(url, use_cache=not no_cache, progress=render.progress)
    report = checker.check(vllm, transformers)
    if removed_in:
        from envkit.compat.check.removed_in import date

        report = date(checker, report)
    render.compat(report, as_json)
    return EXIT_OK if report.compatible else EXIT_CHECK_FAILED


def _pair(state: State, targets: tuple[str, ...]) -> tuple[Version, Version]:
    from envkit.releases.registry import parse_target

    if len(targets) == 1 and "==" not in targets[0]:
        return Catalog.from_option(state.envs).resolve(targets[0]).require_pair()
    found = dict(parse_target(t) for t in targets)
    if len(targets) != 2 or set(found) != {"vllm", "transformers"}:
        raise BadInput(
            f"{' '.join(targets)!r} is not one vLLM release and one transformers release.",
            "Give both: envkit compat vllm==0.8.5 transformers==4.51.3 (or a PROFILE).",
        )
    return found["vllm"], found["transformers"]


COMMANDS = (check_model, which, scan, new_profile, history, compat)
