"""CLI commands for serving: plan, probe, doctor, explain, serve."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from envkit import render
from envkit.cli.options import (
    State,
    compat_lookup,
    complete_profiles,
    finite,
    gpu_choice,
    gpu_target_options,
    json_option,
    plan_options,
    plan_values,
)
from envkit.errors import EXIT_CHECK_FAILED, EXIT_OK, BadInput
from envkit.profiles.catalog import Catalog

if TYPE_CHECKING:
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
@plan_options
@click.option("--compose", is_flag=True, help="Also print a docker-compose service.")
@json_option
@click.pass_context
def plan(
    ctx: click.Context, /, profile: str, model: str, compose: bool, as_json: bool, **values: Any
) -> int:
    """Will MODEL fit this GPU with PROFILE's vLLM? Memory, context, images, command.

    Give the GPU with --gpu NAME or --gpu-memory SIZE. Exit 0 when it fits as asked, 1 when
    not (with the recommendation), 2 on bad input.
    """
    from envkit.serving.plan.planning import plan_for
    from envkit.serving.run.compose import compose as compose_service

    state: State = ctx.obj
    asked = plan_values(ctx, values)
    if asked.gpu is None:
        raise BadInput("Give the GPU: --gpu NAME, or --gpu-memory SIZE (8GiB, 24GB).")
    loaded = Catalog.from_option(state.envs).resolve(profile)
    target = asked.target.target
    gpu_check = None
    if target is not None:  # the kernel table: only for a GPU named by its kernels
        from envkit.gpu.published import profilefit

        gpu_check = profilefit.checker(target)
    result, loaded, verdict = plan_for(
        loaded, model, asked.gpu, asked.settings, render.progress, known=_known(state),
        gpu_check=gpu_check,
    )  # fmt: skip
    extra = (
        compose_service(
            model, result.recommended, loaded.models.vllm, asked.settings.kv_cache_dtype
        )
        if (compose and result.command)
        else ""
    )
    if result.command:  # envkit lint's check of the printed command
        from envkit.serving.command import serve_args
        from envkit.serving.lint.use import lint_notes

        args = serve_args(result.recommended, asked.settings.kv_cache_dtype)
        for line in lint_notes(loaded, [model, *args], what="the plan's command")[1]:
            render.note(line)
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
    from envkit.serving.run import probe

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
@gpu_target_options
@json_option
@click.pass_obj
def doctor(
    state: State, /, venv: Path | None, profile: str | None, as_json: bool, **target: Any
) -> int:
    """Inspect an environment and this machine without changing them.

    Duplicate copies and their installers, drift from a profile, known-bad vLLM and
    transformers pairs, the GPU layer (kernels for the GPU: --gpu, --compute-capability,
    else nvidia-smi's; torch symbols; CUDA libraries; the driver), WSL2, GPUs without
    bfloat16, old hf-xet. Secrets in the environment are redacted. Exit 1 when an error is found.
    """
    from envkit.env import doctor as doctor_module

    loaded = Catalog.from_option(state.envs).resolve(profile) if profile else None
    diagnosis = doctor_module.diagnose(  # the fixes name the transformers a profile pins
        venv, loaded, compat=compat_lookup(None), gpu=gpu_choice(target), profiles=_known(state),
        progress=render.progress,
    )  # fmt: skip
    render.diagnosis(diagnosis, as_json)
    return EXIT_OK if diagnosis.ok else EXIT_CHECK_FAILED


@click.command()
@click.argument("logs", nargs=-1, metavar="[LOG | -]")
@click.option(
    "--diff", is_flag=True, help="Compare two boot logs A B of one start with one change."
)
@click.option(
    "--venv",
    type=click.Path(path_type=Path),
    help="Confirm against the vLLM and transformers installed in this venv.",
)
@click.option(
    "--profile",
    "profile",
    metavar="PROFILE",
    shell_complete=complete_profiles,
    help="Confirm against PROFILE's pins (and name it in the fixes).",
)
@json_option
@click.pass_obj
def explain(
    state: State,
    logs: tuple[str, ...],
    diff: bool,
    venv: Path | None,
    profile: str | None,
    as_json: bool,
) -> int:
    """Explain a vLLM boot log: the root cause, the other problems, the evidence, a fix.

    LOG is a file, or - for standard input (docker logs vllm 2>&1 | envkit explain -).
    With --diff A B: the variables and arguments that differ between two logs, whether vLLM
    acknowledged each, and whether the failure changed. Exit 0 for a healthy start (and for
    --diff), 1 for a failure, 2 for bad input.
    """
    from envkit.serving.explain.explaining import explain_log
    from envkit.serving.explain.knowledge import ShippedKnowledge

    knowledge = ShippedKnowledge(Catalog.from_option(state.envs))
    if diff:
        if len(logs) != 2 or "-" in logs:
            raise BadInput("--diff compares two log files: envkit explain --diff A B.")
        from envkit.serving.explain import logdiff

        render.log_diff(logdiff.diff(logs[0], logs[1], knowledge), as_json)
        return EXIT_OK
    if len(logs) > 1:
        raise BadInput("explain reads one log (or - for standard input); --diff compares two.")
    loaded = Catalog.from_option(state.envs).resolve(profile) if profile else None
    done = explain_log(logs[0] if logs else "-", knowledge, profile=loaded, venv=venv)
    for line in done.notes:
        render.note(line)
    render.explanation(done.explanation, as_json)
    return EXIT_OK if done.explanation.exit_ok else EXIT_CHECK_FAILED


@click.command()
@click.argument("profile", shell_complete=complete_profiles)
@click.argument("model")
@click.argument("vllm_args", nargs=-1, type=click.UNPROCESSED, metavar="[-- VLLM_ARGS...]")
@click.option(
    "--venv",
    type=click.Path(path_type=Path),
    default=Path(".venv"),
    show_default=True,
    help="The venv whose own vllm runs (envkit build made it; it is not verified again).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="The address vLLM listens on (0.0.0.0: every interface).",
)
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@plan_options
@click.option(
    "--no-plan",
    is_flag=True,
    help="No memory plan: vLLM's own defaults, the settings named and the arguments after --.",
)
@click.option(
    "--stall-timeout",
    type=click.FloatRange(0.1, 86400),
    callback=lambda _c, _p, v: finite(v, "--stall-timeout"),
    default=300.0,
    show_default=True,
    help="Seconds of silence at a known stall point (encoder cache profiling) before envkit "
    "stops vLLM.",
)
@click.option(
    "--stop-grace",
    type=click.FloatRange(0, 600),
    callback=lambda _c, _p, v: finite(v, "--stop-grace"),
    default=10.0,
    show_default=True,
    help="Seconds vLLM gets to stop after SIGTERM (or a passed-on Ctrl-C) before SIGKILL.",
)
@click.option(
    "--check", is_flag=True, help="Stop vLLM once it serves: exit 0 means this environment serves."
)
@click.option(
    "--api-key-env",
    metavar="VAR",
    help="Environment variable holding the API key vLLM is to demand (handed over as "
    "VLLM_API_KEY, never on the command line or in the log).",
)
@json_option
@click.pass_context
def serve(
    ctx: click.Context,
    /,
    profile: str,
    model: str,
    vllm_args: tuple[str, ...],
    venv: Path,
    host: str,
    port: int,
    no_plan: bool,
    stall_timeout: float,
    stop_grace: float,
    check: bool,
    api_key_env: str | None,
    as_json: bool,
    **values: Any,
) -> int:
    """Start PROFILE's vLLM (the venv's own vllm serve MODEL) with the arguments envkit plan
    recommends, and watch it: its log goes to the terminal and to .envkit/logs/.

    At a known failure, an exit, or a stall at a known step, vLLM and all it started are stopped
    and the cause and fix are shown (exit 1). Once it is up, envkit probes it (GET
    /v1/models, a 16-token chat) and says it is ready; with --check it then stops it (exit
    0), else vLLM runs on and Ctrl-C reaches it (exit 130). Arguments after -- go to vLLM
    as they are, after envkit's (so they win). The GPU comes from --gpu, --gpu-memory or
    nvidia-smi; with none known, vLLM keeps its own defaults.
    """
    from envkit.serving.explain.knowledge import ShippedKnowledge
    from envkit.serving.run.serve import Hooks, Options
    from envkit.serving.run.start import ServeRequest, run

    state: State = ctx.obj
    asked = plan_values(ctx, values)
    catalog = Catalog.from_option(state.envs)
    request = ServeRequest(
        profile=catalog.resolve(profile),
        model=model,
        vllm_args=vllm_args,
        venv=venv,
        host=host,
        port=port,
        settings=asked.settings,
        given=asked.given,
        gpu=asked.gpu,
        target=asked.target.target.name if asked.target.target is not None else "",
        no_plan=no_plan,
        api_key_env=api_key_env,
        options=Options(stall_timeout=stall_timeout, check=check, stop_grace=stop_grace),
    )
    shown = render.ServeLog(as_json)
    hooks = Hooks(
        output=shown.output, note=render.note, ready=render.serve_ready, progress=shown.progress
    )
    result = run(
        request, ShippedKnowledge(catalog), hooks, render.serve_start, progress=render.progress
    )
    render.serve_result(result, as_json)
    return result.exit_code


COMMANDS = (plan, probe, doctor, explain, serve)
