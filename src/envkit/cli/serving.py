"""CLI commands for serving: plan, probe, doctor."""

from __future__ import annotations

from pathlib import Path

import click

from envkit import render
from envkit.cli.options import (
    State,
    compat_lookup,
    complete_profiles,
    finite,
    json_option,
    revision_option,
)
from envkit.errors import EXIT_CHECK_FAILED, EXIT_OK, BadInput
from envkit.profiles.catalog import Catalog
from envkit.profiles.profile import Profile

# Core modules are imported inside the commands that use them: each command loads only its own.


def _known(state: State) -> list[Profile]:
    """Every profile on the search path (none when there is no profiles folder at all)."""
    try:
        return list(Catalog.from_option(state.envs).list().profiles)
    except BadInput:
        return []


@click.command()
@click.argument("profile", shell_complete=complete_profiles)
@click.argument("model")
@click.option(
    "--gpu", "gpu_name", metavar="NAME", help="A known card (rtx-2070, t4, a100-80gb, ...)."
)
@click.option(
    "--gpu-memory", metavar="SIZE", help="The GPU's memory, with a unit: 8GiB, 24GB [or --gpu]."
)
@click.option(
    "--compute-capability",
    metavar="X.Y",
    help="The card's compute capability (below 8.0: no bfloat16) [or --gpu].",
)
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
@revision_option
@json_option
@click.pass_obj
def plan(
    state: State,
    profile: str,
    model: str,
    gpu_name: str | None,
    gpu_memory: str | None,
    compute_capability: str | None,
    free: str | None,
    utilization: float,
    max_model_len: int | None,
    dtype: str,
    kv_cache_dtype: str,
    reserve: str,
    compose: bool,
    revision: str | None,
    as_json: bool,
) -> int:
    """Will MODEL fit this GPU with PROFILE's vLLM? Memory, context, images, command.

    Exit 0 when it fits as asked, 1 when not (with the recommendation), 2 on bad input.
    """
    from envkit.gpu import cards
    from envkit.models import check_model
    from envkit.serving import command
    from envkit.serving import memory_plan as memplan

    card_memory, card_capability = cards.gpu(gpu_name) if gpu_name else (0, None)
    if gpu_memory is None and not card_memory:
        raise BadInput("Give the GPU: --gpu NAME, or --gpu-memory SIZE (8GiB, 24GB).")
    from envkit.index.wheels import index_url
    from envkit.models.drafts import current_models
    from envkit.releases.registry import Scanner

    loaded = Catalog.from_option(state.envs).resolve(profile)
    # the verdict from the pinned releases, should the [models] table be stale
    scanner = Scanner(index_url(), progress=render.progress)
    loaded, _stale = current_models(loaded, scanner)
    config = check_model.load_model_config(model, revision=revision)
    folder = Path(model) if Path(model).is_dir() else Path(model).parent
    # the plan obeys the verdict (no command if it cannot load); its fixes name the profiles
    # that can (no release look-up here: new-profile does that)
    shipped = [current_models(p, scanner)[0] for p in _known(state)]
    verdict = check_model.report(config, loaded, shipped, None).verdict
    assert verdict is not None
    inp = memplan.PlanInput(
        model=folder,
        gpu_memory=cards.parse_size(gpu_memory, "--gpu-memory") if gpu_memory else card_memory,
        free=cards.parse_size(free, "--free") if free else None,
        utilization=utilization,
        max_model_len=max_model_len,
        dtype=dtype,
        kv_cache_dtype=kv_cache_dtype,
        reserve=cards.parse_size(reserve, "--reserve", allow_zero=True),
        compute_capability=cards.compute_capability(compute_capability)
        if compute_capability
        else card_capability,
        load_problems=verdict.problems,
    )
    result = memplan.make_plan(config.raw, folder, model, inp)
    extra = (
        command.compose(model, result.recommended, loaded.models.vllm, kv_cache_dtype)
        if (compose and result.command)
        else ""
    )
    render.plan(result, verdict, extra, as_json)
    return EXIT_OK if result.ok else EXIT_CHECK_FAILED


@click.command()
@click.argument("base_url")
@click.option("--model", "model", metavar="M", help="Model to ask (default: the first listed).")
@click.option(
    "--api-key-env",
    metavar="VAR",
    help="Environment variable holding the API key (read, sent, never printed).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(0.1, 3600),
    callback=lambda _c, _p, v: finite(v, "--timeout"),
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
    from envkit.serving import probe

    result = probe.probe(base_url, model=model, key_env=api_key_env, timeout=timeout)
    render.probe(result, as_json)
    return EXIT_OK if result.ok else EXIT_CHECK_FAILED


@click.command()
@click.option(
    "--venv",
    type=click.Path(path_type=Path),
    help="The venv to inspect [default: ./.venv, $VIRTUAL_ENV, python3 on PATH].",
)
@click.option(
    "--profile",
    "profile",
    metavar="PROFILE",
    shell_complete=complete_profiles,
    help="Also report drift from PROFILE.",
)
@json_option
@click.pass_obj
def doctor(state: State, venv: Path | None, profile: str | None, as_json: bool) -> int:
    """Inspect an environment and this machine without changing them.

    Duplicate copies and their installers, drift from a profile, known-bad vLLM and
    transformers pairs, torch's CUDA against the driver, WSL2, GPUs without bfloat16, old
    hf-xet. Secrets in the environment are redacted. Exit 1 when an error is found.
    """
    from envkit.env import doctor as doctor_module

    loaded = Catalog.from_option(state.envs).resolve(profile) if profile else None
    diagnosis = doctor_module.diagnose(  # the fixes name the transformers a profile pins
        venv, loaded, compat=compat_lookup(None), profiles=_known(state), progress=render.progress
    )
    render.diagnosis(diagnosis, as_json)
    return EXIT_OK if diagnosis.ok else EXIT_CHECK_FAILED


COMMANDS = (plan, probe, doctor)
