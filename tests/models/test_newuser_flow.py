"""The path a new user walks (field report 1), from a folder of their own: a draft in the
user profile folder (no ./envs), then lock, matrix, publish, build and verify of it from
that folder, every command saying where the profile and its locks are; the group's options
after the subcommand; usage errors that point at the command's own help."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import Indexes
from helpers import PY, envkit, profile_text

CELL = f"py{PY}-linux-x86_64-cu124"
SHIPPED_CELL = "py3.12-linux-x86_64-cu124"  # one of vllm-0.8.5+qwen2-vl's, whatever runs the tests


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's own profile folder (platformdirs' user data folder) holding a draft, as
    ``new-profile`` leaves it when there is no ./envs; returns the folder they work in."""
    data = tmp_path / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    (data / "envkit" / "envs").mkdir(parents=True)
    (data / "envkit" / "envs" / "draft.toml").write_text(profile_text())
    here = tmp_path / "work"
    here.mkdir()
    return here


def test_the_draft_is_locked_published_built_and_verified_from_the_users_folder(
    user: Path, indexes: Indexes
) -> None:
    data = user.parent / "data" / "envkit"
    locks = data / "constraints" / "draft"
    index = ["--index-url", indexes.default]
    res = envkit("lock", "draft", *index, "--torch-index", "default", cwd=user)
    res.assert_ok()
    # the first lines say where the profile is and where its locks went
    assert [line.split() for line in res.out.splitlines()[:2]] == [
        ["PROFILE", "FILE", "LOCKS"],
        ["draft", str(data / "envs" / "draft.toml"), str(locks)],
    ]
    assert (locks / f"{CELL}.txt").is_file() and not (user / "constraints").exists()
    matrix = envkit("matrix", "draft", "--json", cwd=user).json()
    assert matrix["profiles"] == [
        {"name": "draft", "path": str(data / "envs" / "draft.toml"), "locks": str(locks)}
    ]
    assert {c["cell"]: c["state"] for c in matrix["cells"]}[CELL] == "locked"
    # with no ./envs, --all means the user's folder
    assert "draft" in envkit("matrix", cwd=user).out
    published = envkit("publish", "draft", cwd=user)
    published.assert_ok()
    assert json.loads((data / "constraints" / "index.json").read_text())["files"]
    built = envkit("build", "draft", "--json", *index, "--python", sys.executable, cwd=user)
    built.assert_ok()
    got = built.json()
    assert (got["cell"], got["lock"], got["resolved_afresh"]) == (
        CELL, str(locks / f"{CELL}.txt"), None
    )  # fmt: skip
    assert got["profile_path"] == str(data / "envs" / "draft.toml")
    assert (user / ".venv" / "bin" / "python").exists()
    text = envkit("verify", "draft", cwd=user)
    text.assert_ok()
    assert text.out.splitlines()[:2] == [
        f"profile file  {data / 'envs' / 'draft.toml'}",
        f"locks         {locks}",
    ]


def test_build_says_why_it_resolves_afresh(user: Path, indexes: Indexes) -> None:
    args = ["--index-url", indexes.default, "--torch-index", "default", "--python", sys.executable]
    res = envkit("build", "draft", *args, cwd=user)
    res.assert_ok()
    locks = user.parent / "data" / "envkit" / "constraints" / "draft"
    why = f"no lock of cell {CELL} in {locks} (envkit lock draft --cell {CELL} writes one)"
    # piped, the step is one line on stderr; the result names the reason again
    assert f"resolving afresh ({why}): installing vllm==0.8.5" in res.err
    assert "resolved afresh (no lock of cell" in " ".join(res.out.split())
    again = envkit("build", "draft", "--json", "--no-lock", *args, cwd=user).json()
    assert again["resolved_afresh"] == "--no-lock was given" and again["lock"] is None


def test_group_options_are_taken_after_the_subcommand_too(user: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "only.toml").write_text(profile_text())
    after = envkit("matrix", "--envs", str(elsewhere), "only", "--json", cwd=user)
    before = envkit("--envs", str(elsewhere), "matrix", "only", "--json", cwd=user)
    assert after.code == before.code == 0, after.err
    assert after.json() == before.json()
    assert after.json()["profiles"][0]["path"] == str(elsewhere / "only.toml")
    # --envs after the command wins over ENVKIT_ENVS, as before it does
    env = {"ENVKIT_ENVS": str(user)}
    assert envkit("show", "only", "--envs", str(elsewhere), cwd=user, env=env).code == 0
    assert envkit("profiles", "--wide", cwd=user).code == 0
    assert envkit("lock", "--version", cwd=user).out.startswith("envkit, version ")


def test_a_shipped_profile_is_copied_to_the_users_folder_and_locked_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, indexes: Indexes
) -> None:
    """A fresh account (no user data folder, an empty HOME): `envkit lock SHIPPED`, which
    build's and lock --check's fixes name, works; the profile and its published locks are
    copied where new profiles go, said so, and the copy is locked there, never the package."""
    from envkit.profiles.catalog import shipped_envs

    data, home, work = tmp_path / "data", tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    monkeypatch.setenv("HOME", str(home))
    name = "vllm-0.8.5+qwen2-vl"
    package = shipped_envs().parent / "constraints" / name
    before = {f.name: f.read_bytes() for f in package.iterdir()}
    res = envkit("lock", name, "--index-url", indexes.default, "--torch-index", "default",
                 "--cell", SHIPPED_CELL, cwd=work)  # fmt: skip
    copy, locks = data / "envkit" / "envs" / f"{name}.toml", data / "envkit" / "constraints" / name
    said = " ".join(res.err.split())
    assert f"{name} is shipped with envkit" in said and f"copied it to {copy}" in said, res.err
    assert f"locks in {locks}" in said and f"`envkit build {name}` installs these locks" in said
    assert res.code in (0, 1), res.err
    assert copy.read_bytes() == (shipped_envs() / f"{name}.toml").read_bytes()
    # the copy's lock.json records the cell locked here (this offline index cannot resolve
    # the profile's exclude_newer: unresolvable), and the other cell's published lock came along
    cells = json.loads((locks / "lock.json").read_text())["cells"]
    other_cell = next(c for c in cells if c != SHIPPED_CELL)
    assert cells[SHIPPED_CELL]["state"] == "unresolvable" and cells[other_cell]["state"] == "locked"
    assert (locks / f"{other_cell}.txt").read_bytes() == before[f"{other_cell}.txt"]
    assert {f.name: f.read_bytes() for f in package.iterdir()} == before  # the package as it was
    # every command now finds the copy first; a second lock says nothing of copying
    again = envkit("matrix", name, "--json", cwd=work).json()
    assert again["profiles"][0]["path"] == str(copy)
    res = envkit("lock", name, "--check", cwd=work)
    assert "shipped with envkit" not in res.err
    # reading a shipped profile's matrix never copies it
    other = "vllm-0.9.2"
    assert envkit("matrix", other, cwd=work).code == 0
    assert not (data / "envkit" / "envs" / f"{other}.toml").exists()


def test_a_different_profile_of_that_name_is_never_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from envkit.profiles.catalog import shipped_envs

    data = tmp_path / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    name = "vllm-0.9.2"
    mine = data / "envkit" / "envs" / f"{name}.toml"
    mine.parent.mkdir(parents=True)
    mine.write_text(profile_text())
    # named by path, the shipped file is shipped; the user's file of that name stays theirs
    res = envkit("lock", str(shipped_envs() / f"{name}.toml"), cwd=tmp_path)
    assert res.code == 2 and "is another profile of that name" in res.err
    assert mine.read_text() == profile_text()


def test_no_profiles_folder_says_where_drafts_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "empty"))
    res = envkit("lock", "--all", cwd=tmp_path)
    assert res.code == 2
    assert str(tmp_path / "empty" / "envkit" / "envs") in " ".join(res.err.split())


@pytest.mark.parametrize(
    ("args", "usage"),
    [
        (["build"], "Usage: envkit build [OPTIONS] PROFILE"),
        (["lock", "--jobs", "0", "x"], "Usage: envkit lock [OPTIONS] [PROFILES]..."),
        (["plan", "p"], "Usage: envkit plan [OPTIONS] PROFILE MODEL"),
    ],
)
def test_usage_errors_show_the_commands_usage_and_help(
    user: Path, args: list[str], usage: str
) -> None:
    res = envkit(*args, cwd=user)
    assert res.code == 2
    lines = res.err.splitlines()
    assert lines[0].startswith("error: ") and usage in lines
    assert f"`envkit {args[0]} --help` shows its arguments and options." in lines
    assert "envkit --help" not in res.err
