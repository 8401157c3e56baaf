"""Ownership before deletion, honest interrupts and no litter, with faults injected at named
steps of a real build (ENVKIT_FAULT=step=SIGNAL) rather than by timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from forked import envkit_forked

from conftest import Indexes
from helpers import Result, build_args, envkit, run_cli

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
    res.assert_ok()
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


def faulty_build(project: Path, indexes: Indexes, fault: str, *extra: str) -> Result:
    """A build in a process of its own, killed or signalled at the fault's step."""
    args = ["build", "good", *build_args(indexes.default), *extra]
    return envkit_forked(*args, cwd=project, env={"ENVKIT_FAULT": fault})


def test_ctrl_c_before_the_swap_says_the_old_venv_is_unchanged(
    built_copy: Path, indexes: Indexes
) -> None:
    venv = built_copy / ".venv"
    before = build_id(venv)
    done = faulty_build(built_copy, indexes, "verified=INT")
    assert done.code == 130
    last = done.err.strip().splitlines()[-1]
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
    assert done.code == 130, done.err
    last = done.err.strip().splitlines()[-1]
    assert f"The new, verified environment is at {venv}." in last
    assert "Deleting the previous one was cut short" in last
    assert build_id(venv) != before
    assert (built_copy / ".envkit" / ".venv" / "old").exists()
    again = envkit("verify", "good", cwd=built_copy)
    again.assert_ok()
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
    assert done.code == -9
    again = envkit("verify", "good", cwd=built_copy)
    again.assert_ok()
    swapped = step in ("swap-new-moved", "swap-committed", "old-removed")
    assert (build_id(venv) != before) is swapped
    state_is_clean(built_copy)


def symlinked(project: Path, *, absolute: bool) -> tuple[Path, Path, str]:
    """Move the project's .venv to envs-store/proj and link .venv to it, as people point
    .venv at a bigger disk. Returns the link, its target and what the link says."""
    real = project / "envs-store" / "proj"
    real.parent.mkdir()
    (project / ".venv").rename(real)
    link = project / ".venv"
    link.symlink_to(real if absolute else Path("envs-store") / "proj")
    return link, real, os.readlink(link)


# before the swap nothing at the target is touched: the first and the last of those steps
@pytest.mark.parametrize("step", ["venv-created", "verified", *SWAP_STEPS, "old-removed"])
def test_a_symlinked_venv_stays_a_link_through_a_kill_at_every_step(
    built_copy: Path, indexes: Indexes, step: str
) -> None:
    """The rebuild happens beside the link's target and is swapped in place of it; the link
    is never replaced by a folder, and after the next command it leads to a working venv
    (the old one, or the new one) with nothing orphaned beside either."""
    link, real, target = symlinked(built_copy, absolute=step in ("verified", "swap-new-moved"))
    before = build_id(real)
    done = faulty_build(built_copy, indexes, f"{step}=KILL")
    assert done.code == -9
    assert link.is_symlink() and os.readlink(link) == target
    again = envkit("verify", "good", cwd=built_copy)
    again.assert_ok()
    assert link.is_symlink() and os.readlink(link) == target  # the link, as it was
    swapped = step in ("swap-new-moved", "swap-committed", "old-removed")
    assert (build_id(real) != before) is swapped
    assert sorted(p.name for p in real.parent.iterdir()) == [".envkit", "proj"]  # no orphan
    state_is_clean(real.parent, "proj")
    state_is_clean(built_copy)  # nothing was staged beside the link


def test_a_signal_during_the_swap_of_a_symlinked_venv_says_where_it_is(
    built_copy: Path, indexes: Indexes
) -> None:
    """SIGTERM with the target moved aside waits for the new build to be in its place."""
    link, real, target = symlinked(built_copy, absolute=False)
    before = build_id(real)
    done = faulty_build(built_copy, indexes, "swap-old-moved=TERM")
    assert done.code == 130, done.err
    last = done.err.strip().splitlines()[-1]
    assert f"The new, verified environment is at {link}." in last
    assert link.is_symlink() and os.readlink(link) == target and build_id(real) != before
    assert (real.parent / ".envkit" / "proj" / "old").exists()  # beside the target
    again = envkit("verify", "good", cwd=built_copy)
    assert again.code == 0 and "removed the environment replaced" in again.err
    state_is_clean(real.parent, "proj")


def test_a_link_to_nothing_is_built_into_and_stays_a_link(
    project: Path, indexes: Indexes, tmp_path: Path
) -> None:
    """A link whose target does not exist yet, in a folder that does: the build lands at
    the target, and the link is left as it was."""
    disk = tmp_path / "bigdisk"
    disk.mkdir()
    link = project / ".venv"
    link.symlink_to(disk / "proj-venv")
    res = envkit("build", "good", "--json", *build_args(indexes.default), cwd=project)
    res.assert_ok()
    assert res.json()["venv"] == str(link)
    assert link.is_symlink() and os.readlink(link) == str(disk / "proj-venv")
    assert build_id(disk / "proj-venv")
    assert sorted(p.name for p in disk.iterdir()) == [".envkit", "proj-venv"]
    state_is_clean(disk, "proj-venv")
    assert not (project / ".envkit").exists()  # nothing beside the link


def test_links_envkit_cannot_build_through_are_refused(
    project: Path, indexes: Indexes, tmp_path: Path
) -> None:
    """A link into a folder that does not exist (a disk not mounted), a loop, and a link to
    a folder that holds more than a venv: refused, nothing created anywhere."""
    link = project / ".venv"
    link.symlink_to(tmp_path / "unmounted" / "proj-venv")
    res = envkit("build", "good", *build_args(indexes.default), cwd=project)
    assert res.code == 2 and "whose folder does not exist" in res.err, res.err
    assert not (tmp_path / "unmounted").exists() and not (project / ".envkit").exists()
    link.unlink()
    link.symlink_to(project / "loop")
    (project / "loop").symlink_to(link)
    res = envkit("build", "good", *build_args(indexes.default), cwd=project)
    assert res.code == 2 and "(a loop)" in res.err, res.err
    link.unlink()
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "pyvenv.cfg").write_text("home = /usr/bin\n")
    link.symlink_to(work)
    res = envkit("build", "good", *build_args(indexes.default), cwd=project)
    assert res.code == 2 and f"{link} -> {work}" in res.err and "src" in res.err, res.err
    assert sorted(p.name for p in work.iterdir()) == ["pyvenv.cfg", "src"]
    assert link.is_symlink() and not (tmp_path / ".envkit").exists()


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
    res = envkit_forked("verify", "good", cwd=built_copy, env={"TMPDIR": str(scratch)})
    res.assert_ok()
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
