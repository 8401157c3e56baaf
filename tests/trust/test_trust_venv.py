"""Ownership before deletion, honest interrupts and no litter, with faults injected at named
steps of a real build (ENVKIT_FAULT=step=SIGNAL) rather than by timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Indexes
from helpers import build_args, envkit, envkit_process, run_cli

STEPS_BEFORE_SWAP = ["venv-created", "installed", "verified"]
SWAP_STEPS = ["swap-journaled", "swap-old-moved", "swap-new-moved", "swap-committed"]


def build_id(venv: Path) -> str:
    return str(json.loads((venv / "envkit-build.json").read_text())["build_id"])


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def state_is_clean(project: Path, name: str = ".venv") -> None:
    state = project / ".envkit" / name
    left = sorted(p.name for p in state.iterdir()) if state.exists() else []
    assert left in ([], ["lock"]), left


# -- ownership ------------------------------------------------------------------------------


def test_a_project_folder_turned_into_a_venv_is_refused(
    project: Path, indexes: Indexes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`python3 -m venv .` in a project, then a build into it: refused, nothing touched."""
    folder = project / "work"
    (folder / "src" / "pkg").mkdir(parents=True)
    (folder / "src" / "pkg" / "__init__.py").write_text("x = 1\n")
    (folder / "NOTES.md").write_text("notes\n")
    (folder / "bin").mkdir()
    (folder / "pyvenv.cfg").write_text("home = /usr/bin\n")
    before = listing(folder)
    monkeypatch.chdir(project)
    res = run_cli("build", "good", "--venv", str(folder), *build_args(indexes.default))
    assert res.code == 2, res.err
    assert "holds more than a virtual environment" in res.err
    assert "NOTES.md, src" in res.err and "nothing was touched" in res.err
    assert listing(folder) == before
    assert not (project / ".envkit").exists()  # no state folder, no lock left behind


def test_a_folder_with_only_an_empty_pyvenv_cfg_and_a_thesis_is_refused(
    project: Path, indexes: Indexes, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = project / "thesis"
    folder.mkdir()
    (folder / "pyvenv.cfg").write_text("")
    (folder / "thesis.tex").write_text("\\documentclass{article}\n")
    monkeypatch.chdir(project)
    res = run_cli("build", "good", "--venv", str(folder), *build_args(indexes.default))
    assert res.code == 2 and "thesis.tex" in res.err
    assert (folder / "thesis.tex").exists()


def test_a_file_and_envkits_own_environment_are_refused(
    project: Path, indexes: Indexes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    (project / "afile").write_text("data\n")
    res = run_cli("build", "good", "--venv", "afile", *build_args(indexes.default))
    assert res.code == 2 and "is a file" in res.err
    res = run_cli("build", "good", "--venv", sys.prefix, *build_args(indexes.default))
    assert res.code == 2 and "envkit itself is running from" in res.err


def test_a_folder_holding_only_a_venv_is_replaced(
    project: Path, indexes: Indexes, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv = project / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    monkeypatch.chdir(project)
    res = run_cli("build", "good", *build_args(indexes.default))
    assert res.code == 0, res.err
    assert build_id(venv)
    state_is_clean(project)


def test_a_symlinked_state_folder_is_refused(
    project: Path, indexes: Indexes, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project / ".envkit").symlink_to(elsewhere)
    monkeypatch.chdir(project)
    res = run_cli("build", "good", *build_args(indexes.default))
    assert res.code == 2 and "symlink" in res.err
    assert list(elsewhere.iterdir()) == []


# -- honest interrupts ----------------------------------------------------------------------


def faulty_build(
    project: Path, indexes: Indexes, fault: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envkit", "build", "good", *build_args(indexes.default), *extra],
        cwd=project,
        env={**os.environ, "ENVKIT_FAULT": fault},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_ctrl_c_before_the_swap_says_the_old_venv_is_unchanged(
    built_copy: Path, indexes: Indexes
) -> None:
    venv = built_copy / ".venv"
    before = build_id(venv)
    done = faulty_build(built_copy, indexes, "verified=INT")
    assert done.returncode == 130
    last = done.stderr.strip().splitlines()[-1]
    assert f"The environment you had at {venv} is unchanged." in last
    assert build_id(venv) == before
    state_is_clean(built_copy)


@pytest.mark.parametrize(
    "fault", ["swap-journaled=INT", "swap-old-moved=TERM", "swap-committed=INT"]
)
def test_a_signal_during_the_swap_waits_for_it_and_says_so(
    built_copy: Path, indexes: Indexes, fault: str
) -> None:
    """Deferred through the two renames; the last line names the new environment, and the
    next command finishes deleting the old one."""
    venv = built_copy / ".venv"
    before = build_id(venv)
    done = faulty_build(built_copy, indexes, fault)
    assert done.returncode == 130, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert f"The new, verified environment is at {venv}." in last
    assert "Deleting the previous one was cut short" in last
    assert build_id(venv) != before
    assert (built_copy / ".envkit" / ".venv" / "old").exists()
    again = envkit("verify", "good", cwd=built_copy)
    assert again.code == 0, again.err
    assert "removed the environment replaced by the last completed build" in again.err
    state_is_clean(built_copy)


# -- kills at every step, for a plain and a symlinked venv -----------------------------------


@pytest.mark.parametrize("step", STEPS_BEFORE_SWAP + SWAP_STEPS + ["old-removed"])
def test_a_kill_at_any_step_leaves_one_working_venv(
    built_copy: Path, indexes: Indexes, step: str
) -> None:
    venv = built_copy / ".venv"
    before = build_id(venv)
    done = faulty_build(built_copy, indexes, f"{step}=KILL")
    assert done.returncode == -9
    again = envkit("verify", "good", cwd=built_copy)
    assert again.code == 0, again.err
    swapped = step in ("swap-new-moved", "swap-committed", "old-removed")
    assert (build_id(venv) != before) is swapped
    state_is_clean(built_copy)


@pytest.mark.parametrize("absolute", [False, True])
@pytest.mark.parametrize("step", SWAP_STEPS)
def test_a_symlinked_venv_survives_a_kill_at_every_swap_step(
    built_copy: Path, indexes: Indexes, step: str, absolute: bool
) -> None:
    real = built_copy / "envs-store" / "proj"
    real.parent.mkdir()
    (built_copy / ".venv").rename(real)
    link = built_copy / ".venv"
    link.symlink_to(real if absolute else Path("envs-store") / "proj")
    target = os.readlink(link)
    done = faulty_build(built_copy, indexes, f"{step}=KILL")
    assert done.returncode == -9
    again = envkit("verify", "good", cwd=built_copy)
    assert again.code == 0, again.err
    if step in ("swap-journaled", "swap-old-moved"):
        assert link.is_symlink() and os.readlink(link) == target  # the link, as it was
    else:
        assert not link.is_symlink() and build_id(link)  # the new build replaced the link
    assert build_id(real)  # the link's target is never entered or deleted
    state_is_clean(built_copy)


# -- no litter -------------------------------------------------------------------------------


def test_the_next_command_sweeps_what_dead_processes_left(built_copy: Path, tmp_path: Path) -> None:
    pid = dead_pid()
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    (scratch / f"envkit-lock-{pid}-abc").mkdir()
    (scratch / f"envkit-lock-{os.getpid()}-mine").mkdir()  # a live process's: kept
    (scratch / "envkit-notes").mkdir()  # not envkit's pattern: kept
    (scratch / f"envkit-thesis-{pid}-draft").mkdir()  # not a kind envkit makes: kept
    state = built_copy / ".envkit" / ".venv"
    state.mkdir(parents=True, exist_ok=True)
    (state / f".journal.json.{pid}.tmp").write_text("{")
    # a process of its own: the temporary folder is read once per process
    res = envkit_process("verify", "good", cwd=built_copy, env={"TMPDIR": str(scratch)})
    assert res.code == 0, res.err
    assert sorted(p.name for p in scratch.iterdir()) == [
        f"envkit-lock-{os.getpid()}-mine",
        "envkit-notes",
        f"envkit-thesis-{pid}-draft",
    ]
    state_is_clean(built_copy)


def test_a_write_sweeps_only_its_own_leftovers(tmp_path: Path) -> None:
    """Beside a file it writes, envkit removes what a killed writer of that file left, and
    nothing else that merely looks like it."""
    from envkit.io.atomicfile import write_atomic

    pid = dead_pid()
    (tmp_path / f".lock.json.{pid}.tmp").write_text("{")
    (tmp_path / f".notes.md.{pid}.tmp").write_text("someone's draft")
    write_atomic(tmp_path / "lock.json", "{}\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".notes.md.{pid}.tmp", "lock.json"]
