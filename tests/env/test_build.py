"""End to end: the real uv against local indexes of tiny wheels."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock
from forked import Forked, start_forked

from conftest import Indexes
from helpers import build_args, envkit, profile_text


def marker(venv: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((venv / "envkit-build.json").read_text())
    return data


def test_unpinned_build_fails_verification_naming_the_attribute(
    project: Path, indexes: Indexes
) -> None:
    res = envkit("build", "unpinned", "--json", *build_args(indexes.default), cwd=project)
    assert res.code == 1, res.err
    data = res.json()
    assert data["ok"] is False and data["kept_previous"] is True
    failed = {c["name"]: c for c in data["verify"]["checks"] if not c["ok"]}
    probe = failed["transformers.PreTrainedTokenizerBase.all_special_tokens_extended"]
    assert "all_special_tokens_extended" in probe["detail"]
    assert probe["fix"]
    # the resolver took transformers 5 and nothing was left at the venv path
    assert not (project / ".venv").exists()
    assert not (project / ".envkit" / ".venv" / "new").exists()


def test_pinned_build_passes_and_entry_points_survive_the_move(
    built_template: Path, built_report: dict[str, Any], built_copy: Path
) -> None:
    """The session's build of ``good`` (conftest's built_template, built with --json: the
    same build this test made of its own before), read where it was built and in a copy."""
    data = built_report
    assert data["ok"] is True
    # the argv that ran: uv itself, then the install into the new venv's interpreter
    assert Path(data["command"][0]).name == "uv" and data["command"][1:3] == ["pip", "install"]
    assert "--constraints" in data["command"] and "vllm==0.8.5" in data["command"]
    versions = {c["name"]: c["found"] for c in data["verify"]["checks"] if c["kind"] == "version"}
    assert versions == {"transformers": "4.51.3", "vllm": "0.8.5"}
    venv = built_template / ".venv"
    imports = [c for c in data["verify"]["checks"] if c["kind"] == "import"]
    assert all(c["found"].startswith(str(venv)) for c in imports), imports
    # built aside, moved into place: the console script still runs from its new home
    out = subprocess.run([str(venv / "bin" / "vllm")], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "vllm 0.8.5"
    assert marker(venv)["profile"] == "good"
    # and verify agrees, independently (in a copy: the template is only read)
    again = envkit("verify", "good", "--json", cwd=built_copy)
    assert again.code == 0 and again.json()["ok"] is True


@pytest.fixture
def built(project: Path, built_template: Path) -> Path:
    """``good`` built into project/.venv: a copy of the session's build (the venv is
    relocatable), with envkit's state beside it."""
    for name in (".venv", ".envkit"):
        if (built_template / name).exists():
            shutil.copytree(built_template / name, project / name, symlinks=True)
    return project / ".venv"


def test_failed_verification_keeps_the_working_venv(
    project: Path, indexes: Indexes, built: Path
) -> None:
    before = marker(built)["build_id"]
    res = envkit("build", "unpinned", *build_args(indexes.default), cwd=project)
    assert res.code == 1
    assert "left as it was" in " ".join(res.err.split())  # wrapped where the path ends
    assert marker(built)["build_id"] == before
    assert envkit("verify", "good", cwd=project).code == 0


def test_dead_index_keeps_the_working_venv(project: Path, built: Path) -> None:
    before = marker(built)["build_id"]
    res = envkit("build", "good", *build_args("http://127.0.0.1:9/simple"), cwd=project)
    # a network failure is bad input (exit 2), never a verdict on the profile
    assert res.code == 2, res.err
    assert "Cannot reach http://127.0.0.1:9/simple" in res.err
    assert "nothing was changed" in res.err
    assert "Traceback" not in res.err
    assert marker(built)["build_id"] == before
    assert envkit("verify", "good", cwd=project).code == 0


def test_torch_from_default_index_still_demands_the_profile_cuda(
    project: Path, indexes: Indexes
) -> None:
    res = envkit("build", "good", "--json", *build_args(indexes.cpu), cwd=project)
    assert res.code == 1
    cuda = next(c for c in res.json()["verify"]["checks"] if c["name"] == "torch.version.cuda")
    assert cuda["ok"] is False and cuda["expected"] == "12.4"
    assert "CPU build" in cuda["found"] and "--torch-backend cu124" in cuda["fix"]


def test_torch_index_mirror_url(project: Path, indexes: Indexes) -> None:
    args = ["--index-url", indexes.default, "--python", sys.executable]
    res = envkit("build", "good", "--json", *args, "--torch-index", indexes.mirror, cwd=project)
    res.assert_ok()
    data = res.json()
    assert "--index" in data["command"] and indexes.mirror in data["command"]
    torch = next(c for c in data["verify"]["checks"] if c["kind"] == "torch")
    assert torch["found"] == "12.4"
    dist = project / ".venv" / "lib"
    assert list(dist.glob("python*/site-packages/torch-2.6.0+cu124.dist-info"))


def test_torch_index_from_environment(project: Path, indexes: Indexes) -> None:
    args = ["--index-url", indexes.cpu, "--python", sys.executable, "--json"]
    res = envkit("build", "good", *args, cwd=project, env={"ENVKIT_TORCH_INDEX": "default"})
    # the variable chose the default index, whose torch here is a CPU build: refused
    assert res.code == 1, res.err
    data = res.json()
    assert data["torch"]["source"].startswith("the default index")
    cuda = next(c for c in data["verify"]["checks"] if c["name"] == "torch.version.cuda")
    assert cuda["ok"] is False and not (project / ".venv").exists()


def _journal(project: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(
            (project / ".envkit" / ".venv" / "journal.json").read_text()
        )
        return data
    except (OSError, ValueError):
        return {}


def _moments(staging: Path) -> dict[str, Callable[[], bool]]:
    """Observable moments of a build, from its staging folder."""
    return {
        "building": staging.exists,
        "installing": lambda: (staging / "envkit-constraints.txt").exists(),
        "verifying": lambda: bool(list(staging.glob("lib/python*/site-packages/vllm"))),
    }


def test_killed_between_the_two_renames_is_restored(project: Path, built: Path) -> None:
    """The one moment the venv is not at its path: old moved aside, new not yet in."""
    state = project / ".envkit" / ".venv"
    before = marker(built)["build_id"]
    os.rename(built, state / "old")
    (state / "new").mkdir()
    (state / "journal.json").write_text(json.dumps({"phase": "swapping", "build_id": "x"}))
    res = envkit("verify", "good", cwd=project)
    res.assert_ok()
    assert "restored the previous environment" in res.err
    assert marker(built)["build_id"] == before
    assert not (state / "old").exists() and not (state / "new").exists()


def test_killed_after_the_swap_finishes_the_cleanup(project: Path, built: Path) -> None:
    state = project / ".envkit" / ".venv"
    (state / "old").mkdir()
    build_id = marker(built)["build_id"]
    (state / "journal.json").write_text(json.dumps({"phase": "swapping", "build_id": build_id}))
    res = envkit("verify", "good", cwd=project)
    assert res.code == 0
    assert "removed the environment replaced" in res.err
    assert not (state / "old").exists()


def test_unexplained_leftover_is_reported_not_deleted(project: Path, built: Path) -> None:
    old = project / ".envkit" / ".venv" / "old"
    old.mkdir()
    res = envkit("verify", "good", cwd=project)
    assert res.code == 1
    assert "no envkit journal accounts for" in res.err
    assert old.exists()


@pytest.mark.parametrize(
    ("sig", "moment"),
    [
        (signal.SIGINT, "building"),
        (signal.SIGINT, "installing"),
        (signal.SIGINT, "verifying"),
        (signal.SIGTERM, "installing"),
    ],
)
def test_ctrl_c_exits_130_and_keeps_the_venv(
    project: Path, indexes: Indexes, built: Path, sig: signal.Signals, moment: str
) -> None:
    before = marker(built)["build_id"]
    staging = project / ".envkit" / ".venv" / "new"
    proc = start_forked("build", "unpinned", *build_args(indexes.default), cwd=project)
    reached = _moments(staging)[moment]
    deadline = time.monotonic() + 60
    while not reached() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    assert proc.poll() is None, "the build ended before the moment was reached"
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Interrupted" in err and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert f"The environment you had at {built} is unchanged." in last
    assert marker(built)["build_id"] == before
    assert not staging.exists()
    assert not (project / ".envkit" / ".venv" / "journal.json").exists()


def test_second_build_waits_for_the_first(project: Path, indexes: Indexes, built: Path) -> None:
    lock = FileLock(str(project / ".envkit" / ".venv" / "lock"))
    before = marker(built)["build_id"]
    with lock:  # held by this process; the build is another, forked from the warm one
        proc = start_forked("build", "good", *build_args(indexes.default), cwd=project)
        assert isinstance(proc, Forked)  # this environment: forked, not started afresh
        seen = ""
        while "waiting for another envkit process" not in seen:  # it says so, then waits
            assert proc.poll() is None, f"the build ended without waiting for the lock: {seen}"
            time.sleep(0.02)
            seen = proc.err_so_far()
        assert proc.poll() is None, "the build did not wait for the lock"
        assert not (project / ".envkit" / ".venv" / "new").exists()
        assert marker(built)["build_id"] == before
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, seen + err
    assert marker(built)["build_id"] != before


def test_two_builds_at_once_are_serialised(project: Path, indexes: Indexes) -> None:
    args = ["build", "good", "--json", *build_args(indexes.default)]
    procs = [start_forked(*args, cwd=project) for _ in range(2)]
    results = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    replaced = sorted(json.loads(out)["replaced_previous"] for out, _ in results)
    assert replaced == [False, True]  # one created it, the other replaced it, in turn
    assert envkit("verify", "good", cwd=project).code == 0


def test_refuses_to_replace_a_folder_that_is_not_a_venv(project: Path, indexes: Indexes) -> None:
    target = project / "data"
    target.mkdir()
    (target / "precious.txt").write_text("keep me")
    res = envkit("build", "good", "--venv", "data", *build_args(indexes.default), cwd=project)
    assert res.code == 2
    assert "not a virtual environment" in res.err
    assert (target / "precious.txt").read_text() == "keep me"


def test_missing_interpreter_says_where_it_looked(project: Path, indexes: Indexes) -> None:
    (project / "envs" / "future.toml").write_text(profile_text(python="3.99"))
    res = envkit("build", "future", "--index-url", indexes.default, cwd=project)
    assert res.code == 2
    assert "No installed interpreter fits Python 3.99" in res.err
    assert "pyenv:" in res.err and "PATH:" in res.err and "--python" in res.err


def test_python_option_that_does_not_fit_the_profile(project: Path, indexes: Indexes) -> None:
    (project / "envs" / "future.toml").write_text(profile_text(python="3.99"))
    res = envkit("build", "future", "--python", sys.executable, cwd=project)
    assert res.code == 2
    assert "but the profile asks for Python 3.99" in res.err


def test_a_backend_the_pinned_torch_is_not_published_for_is_refused_first(
    project: Path, indexes: Indexes
) -> None:
    """--torch-backend cu999 is well-formed, but torch 2.6's series is published for CUDA
    11.8, 12.4 and 12.6 (envkit's table): refused before a venv is made, not by uv after."""
    pinned = profile_text(constraints=("transformers==4.51.3", "torch==2.6.0"))
    (project / "envs" / "pinned.toml").write_text(pinned)
    res = envkit("build", "pinned", "--torch-backend", "cu999", *build_args(indexes.default),
                 cwd=project)  # fmt: skip
    res.assert_fails(2, mentioning=("is published for CUDA 11.8, 12.4, 12.6, not 99.9",
                                    "Pass one of cu118, cu124, cu126, or cpu."))  # fmt: skip
    assert not (project / ".venv").exists() and not (project / ".envkit").exists()


def test_credentials_in_index_urls_never_reach_output_or_files(project: Path, built: Path) -> None:
    secret = "s3cr3t-t0ken"
    url = f"http://builder:{secret}@127.0.0.1:9/simple"
    for extra in ([], ["--json"]):
        res = envkit("build", "good", *build_args(url), *extra, cwd=project)
        assert res.code == 2  # nothing listens on port 9: a network failure
        assert secret not in res.out + res.err
        assert "Cannot reach http://127.0.0.1:9/simple" in res.out + res.err
    assert secret not in (built / "envkit-build.json").read_text()
