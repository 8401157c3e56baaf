"""The lazy command group: every command is named in cli.group's table and listed by
``envkit --help`` with its short help, each command's ``--help`` works, and a command loads
only what it uses (checked in new processes by the modules they hold, never by timing)."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from envkit.cli import group

from helpers import FIXTURES, ROOT, run_cli

COMMAND_MODULES = (
    "envkit.cli.env",
    "envkit.cli.models",
    "envkit.cli.locks",
    "envkit.cli.serving",
    "envkit.cli.image",
    "envkit.cli.export",
    "envkit.cli.lint",
    "envkit.cli.upgrade",
    "envkit.cli.fleet",
    "envkit.cli.site",
    "envkit.cli.knowledge",
)
MODEL = str(FIXTURES / "models" / "Qwen2-VL-2B-Instruct")


def test_the_table_names_every_command_of_every_module() -> None:
    defined = {
        str(command.name): name
        for name in COMMAND_MODULES
        for command in importlib.import_module(name).COMMANDS
    }
    assert defined == group.COMMAND_MODULES
    assert set(group.COMMAND_MODULES.values()) == set(COMMAND_MODULES)


def test_help_lists_every_command_with_its_short_help() -> None:
    res = run_cli("--help").assert_ok()
    listed = res.out.split("Commands:", 1)[1]
    for name in group.COMMAND_MODULES:
        command = group.load(name)
        assert f"\n  {name} " in listed, name
        first_words = " ".join(str(command.short_help).split()[:4])
        assert first_words in " ".join(listed.split()), name


@pytest.mark.parametrize("name", sorted(group.COMMAND_MODULES))
def test_each_commands_help_works(name: str) -> None:
    res = run_cli(name, "--help").assert_ok()
    assert res.out.startswith(f"Usage: envkit {name} ")
    assert "--envs DIR" in res.out and "--wide" in res.out  # the group's options, after it


def test_an_unknown_command_is_offered_the_closest_name() -> None:
    res = run_cli("chek-model", "a", "b")
    res.assert_fails(2, mentioning=("No such command 'chek-model'", "check-model"))
    assert "Traceback" not in res.err


def test_the_group_options_still_follow_the_command(tmp_path: Path) -> None:
    (tmp_path / "solo.toml").write_text('python = "3.12"\nrequirements = ["vllm==0.8.5"]\n')
    res = run_cli("profiles", "--json", "--envs", str(tmp_path)).assert_ok()
    assert [p["name"] for p in res.json()["profiles"]] == ["solo"]


def loaded_by(runs: list[list[str]], cache: Path) -> set[str]:
    """The modules a new process holds after running ``envkit ARGS`` for each of ``runs``,
    one after the other, with its own envkit cache."""
    code = (
        "import json, sys, contextlib, io\n"
        "from envkit.cli import main\n"
        "quiet = io.StringIO()\n"
        "with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):\n"
        f"    for args in {runs!r}:\n"
        "        main(args)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    env = {**os.environ, "ENVKIT_CACHE_DIR": str(cache), "HF_HUB_OFFLINE": "1"}
    env.pop("ENVKIT_FAULT", None)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout))


# a boot that stops on vLLM's check of the free memory (written here, as envkit's tests do)
FREE_LOG = (
    "INFO 05-12 10:00:01 [api_server.py:1043] vLLM API server version 0.8.5\n"
    "ERROR 05-12 10:00:11 [core.py:700] ValueError: Free memory on device (6.98/8.0 GiB) on "
    "startup is less than desired GPU memory utilization (0.9, 7.2 GiB). Decrease GPU memory "
    "utilization or reduce GPU memory used by other processes.\n"
)
HEAVY = {"httpx", "tomlkit", "elftools", "resolvelib", "filelock", "huggingface_hub"}
# every command: render.image's name is the package's, but the report formatter it uses is
# imported where it formats one
EVERY_UNUSED = {"envkit.render.env", "envkit.env.checks"}
# what a command that sends no request for shipped profiles must not load: TLS, the knowledge
# snapshot reader (nothing put one in use), vLLM's test registry (every [models] table is
# current), the email parser of METADATA (nothing is scanned)
OFFLINE_UNUSED = {"ssl", "envkit.index.snapshot", "envkit.releases.testregistry", "email.parser"}
# nor, with every [models] table current, the release reader, an index session or its client
# (models.current.lazy_scanner makes one only for a stale table)
UNSCANNED = {"envkit.releases.registry", "envkit.index.session", "envkit.index.pages"}


def test_version_loads_no_command_module(tmp_path: Path) -> None:
    held = loaded_by([["--version"]], tmp_path)
    assert not held & {*COMMAND_MODULES, *HEAVY, "packaging", "platformdirs"}
    # said without click, the group or any result's formatting (the quickest call of all)
    assert not held & {"click", "envkit.cli.app", "envkit.cli.group", "envkit.render.models"}


# each command's first run, the boot logs it reads, with its own cache each
LOADS = [
    (
        ["check-model", "vllm-0.8.5+qwen2-vl", MODEL],
        {"envkit.cli.serving", "envkit.compat", *OFFLINE_UNUSED, *UNSCANNED, "envkit.io.http"},
    ),
    (
        ["plan", "vllm-0.8.5+qwen2-vl", MODEL, "--gpu-memory", "24GiB"],
        # no GPU named by its kernels (--gpu-memory alone): no kernel table
        {"envkit.cli.models", "envkit.compat", "envkit.gpu.published.kerneltable"},
    ),
    (
        ["explain", "{log}"],
        {"envkit.cli.models", "envkit.profiles.profile", "packaging.requirements"}
        | {"envkit.serving.plan.memory_plan", "envkit.gpu.published.kerneltable"},
    ),
    (
        ["explain", "{free}"],  # the free-memory fix: one line of the plan's arithmetic
        {"envkit.serving.plan.memory_plan", "envkit.gpu.published.kerneltable"},
    ),
]


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("logs")
    (folder / "boot.log").write_text(
        "INFO starting\nERROR torch.OutOfMemoryError: CUDA out of memory.\n"
    )
    (folder / "free.log").write_text(FREE_LOG)
    return {"{log}": str(folder / "boot.log"), "{free}": str(folder / "free.log")}


def argv_of(args: list[str], logs: dict[str, str]) -> list[str]:
    return [logs.get(a, a) for a in args]


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory, logs: dict[str, str]) -> Path:
    """An envkit cache as each command's first run leaves it: one new process runs them all
    (what one of them writes, the same files by their content's name, is what it writes
    alone; explain writes nothing)."""
    cache = tmp_path_factory.mktemp("warm") / "cache"
    loaded_by([argv_of(args, logs) for args, _ in LOADS], cache)
    return cache


@pytest.mark.parametrize(
    ("args", "not_loaded"),
    LOADS,
    ids=["check-model", "plan", "explain", "explain-free-memory"],
)
def test_a_command_loads_only_what_it_uses(
    args: list[str], not_loaded: set[str], tmp_path: Path, logs: dict[str, str], warm: Path
) -> None:
    argv = argv_of(args, logs)
    # the second run: the shipped profiles' TOML came from envkit's cache, not tomlkit
    shutil.copytree(warm, tmp_path / "cache")
    held = loaded_by([argv], tmp_path / "cache")
    # plan checks the command it prints with envkit lint, which reads the release's parser
    # from the index (issue 30): the HTTP client is the one heavy library it may load
    heavy = HEAVY - {"httpx"} if argv[0] == "plan" else HEAVY
    assert not held & (heavy | not_loaded | EVERY_UNUSED | {"envkit.cli.locks", "envkit.cli.site"})


def test_a_command_is_given_the_group_options_once() -> None:
    for _ in range(2):
        run_cli("show", "--help").assert_ok()
    command = group.load("show")
    names = [p.name for p in command.params if isinstance(p, click.Option)]
    assert names.count("envs") == 1 and names.count("wide") == 1


def test_a_ctrl_c_while_the_arguments_are_parsed_prints_nothing_of_clicks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """click's own main answers a KeyboardInterrupt with an empty line on stderr before it
    aborts; the group turns one met while parsing (an option's callback) into Abort, so
    "envkit: Interrupted." (cli.app) is the only line said."""

    def interrupted(ctx: click.Context, param: click.Parameter, value: object) -> None:
        raise KeyboardInterrupt

    command = group.LazyGroup(
        "envkit", params=[click.Option(["--slow"], is_flag=True, callback=interrupted)]
    )
    with pytest.raises(click.exceptions.Abort):
        command.main(args=["--slow"], standalone_mode=False, prog_name="envkit")
    assert capsys.readouterr().err == ""


def test_a_ctrl_c_while_the_context_is_torn_down_prints_nothing_of_clicks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The group's context closes inside click's main, after the command: a Ctrl-C in its
    close callbacks is Abort too, never click's empty line."""

    def interrupt() -> None:
        raise KeyboardInterrupt

    def late(ctx: click.Context, param: click.Parameter, value: object) -> None:
        if value:
            ctx.call_on_close(interrupt)

    command = group.LazyGroup(
        "envkit",
        invoke_without_command=True,
        params=[click.Option(["--late"], is_flag=True, callback=late)],
    )
    with pytest.raises(click.exceptions.Abort):
        command.main(args=["--late"], standalone_mode=False, prog_name="envkit")
    assert capsys.readouterr().err == ""
