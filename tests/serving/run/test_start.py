"""serving.run.start: serve's flow up to the start, from a typed ServeRequest: what runs,
what is said about it, and what is refused before anything starts."""

from __future__ import annotations

import shlex
import socket
from pathlib import Path

import pytest

from envkit.errors import BadInput
from envkit.profiles.profile import Profile, parse_profile
from envkit.serving.plan.planning import Settings
from envkit.serving.run.start import ServeRequest, prepare

from helpers import ROOT, profile_text
from registry_world import MODELS


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _request(tmp_path: Path, *vllm_args: str) -> ServeRequest:
    program = tmp_path / ".venv" / "bin" / "vllm"
    program.parent.mkdir(parents=True, exist_ok=True)
    program.write_text("#!/bin/sh\nexit 3\n")
    program.chmod(0o755)
    profile: Profile = parse_profile(profile_text(), path=tmp_path / "p.toml", name="p")
    return ServeRequest(
        profile=profile,
        model="org/model",
        vllm_args=vllm_args,
        venv=tmp_path / ".venv",
        host="127.0.0.1",
        port=_free_port(),
        settings=Settings(),
        given=frozenset(),
        gpu=None,
        no_plan=True,
    )


def test_a_launch_without_a_plan_runs_the_venvs_vllm_and_says_why(tmp_path: Path) -> None:
    request = _request(tmp_path, "--api-key", "k-1234567890abcdef")
    launch = prepare(request)
    assert launch.argv[:7] == (
        str(tmp_path / ".venv" / "bin" / "vllm"),
        "serve",
        "org/model",
        "--host",
        "127.0.0.1",
        "--port",
        str(request.port),
    )
    assert "k-1234567890abcdef" not in " ".join(launch.shown)  # a key after -- is masked
    assert any(n.startswith("--no-plan") for n in launch.notes)
    assert any("no envkit marker" in w for w in launch.warnings)
    assert any("--api-key-env VAR" in w for w in launch.warnings)


@pytest.mark.parametrize("arg", ["--port=9", "--host", "--model", "serve"])
def test_an_argument_envkit_sets_itself_is_refused(tmp_path: Path, arg: str) -> None:
    with pytest.raises(BadInput) as info:
        prepare(_request(tmp_path, arg))
    assert f"{arg!r} after --" in info.value.message


def test_serves_plan_note_is_quoted_like_the_command(tmp_path: Path) -> None:
    """serve's 'plan (...): ARGS' line pastes as the arguments it starts vLLM with."""
    from envkit.gpu.cards import GIB
    from envkit.profiles.catalog import Catalog
    from envkit.serving.command import MmLimits
    from envkit.serving.plan.planning import Gpu, asked_args
    from envkit.serving.run.start import _planned_args

    profile = Catalog.from_option(str(ROOT / "envs")).resolve("vllm-0.8.5+qwen2-vl")
    settings = Settings(mm_limits=MmLimits.parse("image=2"))
    request = ServeRequest(
        profile=profile,
        model=str(MODELS / "Qwen2-VL-2B-Instruct"),
        vllm_args=(),
        venv=tmp_path,
        host="127.0.0.1",
        port=8000,
        settings=settings,
        given=frozenset({"mm_limits"}),
        gpu=Gpu(memory=8 * GIB, source="--gpu-memory 8GiB"),
    )
    args, notes = _planned_args(request, lambda *_a, **_k: None)
    shown = notes[0].split("): ", 1)[1]
    assert shlex.split(shown) == args
    assert "--mm-processor-kwargs '{\"max_pixels\": 401408}'" in shown
    assert args[args.index("--limit-mm-per-prompt") + 1] == '{"image": 2}'
    # without a plan, the settings named still go to vLLM, in its JSON
    assert asked_args(settings, request.given) == ["--limit-mm-per-prompt", '{"image": 2}']
