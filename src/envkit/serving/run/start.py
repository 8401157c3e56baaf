"""``serve PROFILE MODEL`` as one flow: what to start (the venv's vllm, the host and a free
port, the API key, the plan's arguments or vLLM's defaults, envkit lint's check of the
command), said through ``started``, then the watched run (``serve.serve``). The command
line parses and renders; this assembles."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from envkit.errors import BadInput, ServeRefused
from envkit.progress import Progress, quiet
from envkit.serving.run import launch as start
from envkit.serving.run.serve import Hooks, Options, ServeResult, serve

if TYPE_CHECKING:
    from envkit.profiles.profile import Profile
    from envkit.serving.explain.envpins import Installed
    from envkit.serving.explain.knowledge import Knowledge
    from envkit.serving.plan.planning import Gpu, Settings


@dataclass(frozen=True, slots=True)
class ServeRequest:
    """What ``envkit serve`` was asked, every value checked where it entered (the CLI's
    options): the plan's ``settings`` with the names ``given``, the ``gpu`` its memory
    comes from (None: nvidia-smi's, else none), ``target`` the GPU named for the kernels."""

    profile: Profile
    model: str
    vllm_args: tuple[str, ...]
    venv: Path
    host: str
    port: int
    settings: Settings
    given: frozenset[str]
    gpu: Gpu | None
    target: str = ""
    no_plan: bool = False
    api_key_env: str | None = None
    options: Options = field(default_factory=Options)


def run(
    request: ServeRequest,
    knowledge: Knowledge,
    hooks: Hooks,
    started: Callable[[start.Launch], None],
    progress: Progress = quiet,
) -> ServeResult:
    """Prepare the launch (ServeRefused, BadInput: nothing started), say it through
    ``started``, then serve it to its end."""
    launch = prepare(request, progress)
    started(launch)
    return serve(launch, request.options, hooks, knowledge, installed=_installed(launch.venv))


def prepare(request: ServeRequest, progress: Progress = quiet) -> start.Launch:
    """The launch ``request`` makes: refused (ServeRefused, BadInput) before anything runs
    when the venv has no vllm, the port is held, an argument after -- is one envkit sets,
    or envkit lint finds an error in the command."""
    from envkit.serving.lint.use import lint_notes, refuse_on_error  # envkit lint's check

    loaded, vllm_args = request.profile, request.vllm_args
    venv = Path(os.path.abspath(request.venv))
    program = start.vllm_program(venv, loaded.name)
    _refuse_owned_args(vllm_args)
    given_keys = start.arg_keys(vllm_args)  # remembered: masked from here on
    key = start.api_key(request.api_key_env)
    host = start.checked_host(request.host)
    start.refuse_busy_port(host, request.port)
    planned, notes = _planned_args(request, progress)
    env, probe_key = start.child_env(key, given_keys[0] if given_keys else "")
    argv = start.command(program, request.model, host, request.port, planned, vllm_args)
    warnings = [w for w in (start.marker_warning(venv, loaded.name),) if w]
    variables = {k: v for k, v in {**os.environ, **env}.items() if k.startswith("VLLM_")}
    lint_report, lint_lines = lint_notes(loaded, argv[2:], variables)
    refuse_on_error(lint_report, loaded)
    (warnings if lint_report is not None else notes).extend(lint_lines)
    if any(a.split("=")[0] == "--api-key" for a in vllm_args):
        warnings.append(
            "a key after -- (vLLM's --api-key) is on the command line every user's ps "
            "shows; --api-key-env VAR hands it over in the environment instead"
        )
    return start.Launch(
        profile=loaded.name,
        model=request.model,
        venv=venv,
        argv=argv,
        shown=start.masked(argv),
        env=env,
        key=probe_key,
        host=host,
        port=request.port,
        notes=tuple(notes),
        warnings=tuple(warnings),
        gpu=request.target,
    )


def _refuse_owned_args(vllm_args: tuple[str, ...]) -> None:
    for arg in vllm_args:
        name = arg.split("=")[0]
        if name in ("--host", "--port", "--model") or arg == "serve":
            raise BadInput(
                f"{arg!r} after --: envkit serve sets vLLM's host, port and model itself "
                "(the probe asks there).",
                "Give --host, --port and MODEL to envkit serve instead.",
            )


def _planned_args(request: ServeRequest, progress: Progress) -> tuple[list[str], list[str]]:
    """The plan's vllm serve arguments and what to say about them."""
    from envkit.serving.command import serve_args, shell_words
    from envkit.serving.plan.planning import asked_args, gpu_from_nvidia_smi, plan_for

    loaded, model, settings = request.profile, request.model, request.settings
    if request.no_plan:
        return asked_args(settings, request.given), [
            "--no-plan: vLLM's own defaults, but for the settings named"
        ]
    gpu = request.gpu or gpu_from_nvidia_smi()
    if gpu is None:
        return asked_args(settings, request.given), [
            "no GPU memory known (no --gpu, --gpu-memory, or nvidia-smi): vLLM's own "
            "defaults (utilisation 0.9, the model's whole context), but for the settings named"
        ]
    result, _profile, _verdict = plan_for(loaded, model, gpu, settings, progress)
    if not result.command:
        problems = "; ".join(f"{p.code}: {p.message}" for p in result.problems)
        raise ServeRefused(
            f"envkit plan has no command for {model} with {loaded.name} on this GPU "
            f"({gpu.source}): {problems or 'no setting fits'}.",
            f"{gpu.plan_command(loaded.name, str(model))} shows the numbers; --no-plan starts "
            "vLLM with its own defaults anyway.",
        )
    args = serve_args(result.recommended, settings.kv_cache_dtype)
    notes = [f"plan ({gpu.source}): {shell_words(args)}"]
    notes += [f"plan: {p.code}: {p.message} (so: {p.fix})" for p in result.problems if p.fix]
    return args, notes


def _installed(venv: Path) -> Installed | None:
    from envkit.serving.explain.envpins import from_venv

    try:
        return from_venv(venv)
    except BadInput:  # not a venv envkit can read: the fixes go without its versions
        return None
