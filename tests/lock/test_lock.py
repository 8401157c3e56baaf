"""Lock matrices against local indexes, with the real uv: lock, check, matrix, publish, build."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from forked import envkit_forked

from envkit.io import process
from envkit.io.uv import find_uv

import wheelhouse
from conftest import Indexes
from helpers import OTHER, PY, build_args, envkit, lock_args, locked_matrix, matrix_profile


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A project: envs/ with a 4-cell profile, constraints/ beside it."""
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "m.toml").write_text(matrix_profile([PY, OTHER]))
    return tmp_path


@pytest.fixture(scope="module")
def _locked_once(tmp_path_factory: pytest.TempPathFactory, indexes: Indexes) -> Path:
    """``envkit lock m`` of the ``repo`` profile, run once a run (helpers.locked_matrix)."""
    return locked_matrix(tmp_path_factory, indexes)


@pytest.fixture
def locked(repo: Path, _locked_once: Path) -> Path:
    """``repo`` as ``envkit lock m`` leaves it, for the tests of what comes after a lock: the
    module's one lock copied (a second lock writes the same bytes, the first test shows)."""
    shutil.copytree(_locked_once / "constraints", repo / "constraints")
    return repo


def test_lock_writes_every_cell_with_header_and_hashes(
    repo: Path, indexes: Indexes, _locked_once: Path
) -> None:
    res = envkit("lock", "m", "--json", *lock_args(indexes), cwd=repo)
    res.assert_ok()
    cells = {c["cell"]: c for c in res.json()["cells"]}
    assert set(cells) == {
        f"py{p}-{plat}-cu124" for p in (PY, OTHER) for plat in ("linux-x86_64", "linux-aarch64")
    }
    assert all(c["state"] == "locked" for c in cells.values())
    folder = repo / "constraints" / "m"
    cell_file = folder / f"py{PY}-linux-x86_64-cu124.txt"
    txt = cell_file.read_text()
    lines = txt.splitlines()
    assert lines[0] == f"# envkit lock: profile m, cell py{PY}-linux-x86_64-cu124"
    assert lines[1].startswith("# profile-digest: sha256:")
    assert lines[2].startswith("# uv: ")
    assert "reproduce: envkit lock m --cell" in txt
    assert "transformers==4.51.3 \\" in txt and "--hash=sha256:" in txt
    assert "requirements.in" in txt and "envkit-lock-" not in txt  # no temporary paths
    pylock = folder / f"pylock.py{PY.replace('.', '')}-linux-x86_64-cu124.toml"
    assert 'lock-version = "1.0"' in pylock.read_text()
    manifest = json.loads((folder / "lock.json").read_text())
    assert manifest["cells"][f"py{PY}-linux-x86_64-cu124"]["state"] == "locked"

    # deterministic: the module's lock of the same profile, made in another folder (and
    # another test's turn), wrote the same bytes, every file of every cell and lock.json
    def written(where: Path) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in where.iterdir() if p.is_file()}

    assert len(written(folder)) == 9
    assert written(folder) == written(_locked_once / "constraints" / "m")
    # plain uv, handed the published file, resolves the pinned transformers
    (repo / "in.txt").write_text("vllm==0.8.5\n")
    out = subprocess.run(
        [
            find_uv(),
            "pip",
            "compile",
            "in.txt",
            "-c",
            str(cell_file),
            "--default-index",
            indexes.default,
            "--python-version",
            PY,
            "--quiet",
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "transformers==4.51.3" in out.stdout


def test_check_and_staleness_after_an_edit(locked: Path, indexes: Indexes) -> None:
    repo = locked
    ok = envkit("lock", "m", "--check", "--json", cwd=repo)
    assert ok.code == 0 and ok.json()["stale"] == []
    # (--check --resolve of this lock passes: test_check_resolve_uses_the_torch_source_...)
    profile = repo / "envs" / "m.toml"
    profile.write_text(profile.read_text().replace("transformers==4.51.3", "transformers==5.0.0"))
    stale = envkit("lock", "m", "--check", "--json", cwd=repo)
    assert stale.code == 1
    assert len(stale.json()["stale"]) == 4
    text = envkit("lock", "--all", "--check", cwd=repo)
    assert text.code == 1 and "4 of 4 cells are stale, missing, unresolvable or refused" in text.out
    assert "envkit lock m --cell" in text.out
    # build refuses the stale lock and says how to refresh it
    build = envkit("build", "m", *build_args(indexes.default), cwd=repo)
    assert build.code == 2 and "is stale" in build.err and "--no-lock" in build.err


def test_unresolvable_and_source_only_cells_beside_good_ones(tmp_path: Path) -> None:
    index = wheelhouse.write_index(
        tmp_path / "idx",
        [
            wheelhouse.vllm(),
            wheelhouse.transformers("4.51.3", with_attribute=True),
            wheelhouse.torch("2.6.0", cuda="12.4"),
            wheelhouse.Wheel(
                "fastkernels",
                "1.0",
                {"fastkernels/__init__.py": ""},
                tag="py3-none-manylinux_2_17_x86_64",
                sdist=True,
            ),
        ],
    )
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "k.toml").write_text(
        matrix_profile(["3.9", PY], extra=', "fastkernels==1.0"')
    )
    res = envkit(
        "lock", "k", "--json", "--index-url", index, "--torch-index", "default", cwd=tmp_path
    )
    assert res.code == 1  # a cell could not resolve
    cells = {c["cell"]: c for c in res.json()["cells"]}
    bad = cells["py3.9-linux-x86_64-cu124"]
    assert bad["state"] == "unresolvable"
    assert "3.10" in bad["reason"] and "\n" not in bad["reason"]  # uv's reason, one paragraph
    assert cells[f"py{PY}-linux-x86_64-cu124"]["state"] == "locked"
    aarch = cells[f"py{PY}-linux-aarch64-cu124"]
    assert aarch["state"] == "source-only" and aarch["source_only"] == ["fastkernels"]
    matrix = envkit("matrix", "k", "--json", cwd=tmp_path).json()
    states = {c["cell"]: c["state"] for c in matrix["cells"]}
    assert states["py3.9-linux-x86_64-cu124"] == "unresolvable"
    assert states[f"py{PY}-linux-aarch64-cu124"] == "source-only"


def test_github_matrix_covers_every_cell(repo: Path) -> None:
    (repo / "envs" / "second.toml").write_text(matrix_profile([PY]))
    res = envkit("matrix", "--github", cwd=repo)
    assert res.code == 0
    data = json.loads(res.out)
    assert list(data) == ["include"]
    assert len(data["include"]) == 6
    assert {e["profile"] for e in data["include"]} == {"m", "second"}
    for entry in data["include"]:
        assert set(entry) >= {"profile", "cell", "python", "platform", "backend", "state"}
        # a runner of the cell's own platform, and where its lock took torch from
        assert (
            entry["runner"]
            == {
                "linux-x86_64": "ubuntu-latest",
                "linux-aarch64": "ubuntu-24.04-arm",
            }[entry["platform"]]
        )
        assert entry["torch_index"] == ""  # not locked yet: the backend
    assert res.out.count("\n") == 1  # one line, for $GITHUB_OUTPUT


def test_github_matrix_refuses_more_than_256_jobs(repo: Path) -> None:
    pythons = [f"3.{n}" for n in range(9, 14)]
    backends = ", ".join(f'"cu{n}"' for n in range(118, 118 + 26))
    text = matrix_profile(pythons, python=">=3.9").replace(
        'backends = ["cu124"]', f"backends = [{backends}]"
    )
    (repo / "envs" / "huge.toml").write_text(text)  # 5 x 2 x 26 = 260 cells, with m's 4
    res = envkit("matrix", "--github", cwd=repo)
    assert res.code == 2 and "at most 256 jobs" in res.err and res.out == ""


def test_a_folder_without_a_readable_profile_is_said_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    """matrix, lock --all and publish --all over an empty profiles folder (or one whose only
    profile is broken) say so: no table of headers alone, no empty index published."""
    envs = tmp_path / "envs"
    envs.mkdir()
    for argv in (["matrix"], ["lock", "--all"], ["publish", "--all"]):
        res = envkit(*argv, cwd=tmp_path)
        assert res.code == 2 and f"No profile in {str(envs)!r}." in res.err, (argv, res)
        assert res.out == ""
    (envs / "broken.toml").write_text("[profile\n")
    res = envkit("publish", "--all", cwd=tmp_path)
    assert res.code == 2 and "can be read: the 1 above is broken." in res.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["envs"]  # no constraints folder


def test_check_resolve_uses_the_torch_source_each_cell_was_locked_with(
    locked: Path, indexes: Indexes
) -> None:
    """Locked from the default index, checked against the default index, with no
    --torch-index given (the PyTorch index would give another resolution, or none). A cell
    whose constraints resolve to the published ones again takes its published pylock (same
    pins, same files by their hashes, same uv and index: uv would write it again), so uv runs
    once for it; a cell that resolves to another result is stale, after both resolutions."""
    repo = locked
    changed = f"py{OTHER}-linux-aarch64-cu124"
    txt = repo / "constraints" / "m" / f"{changed}.txt"
    # its published body no longer what the index gives (as after a new release of a
    # dependency the profile leaves open)
    assert "transformers==4.51.3 \\" in txt.read_text()
    txt.write_text(txt.read_text().replace("transformers==4.51.3 \\", "transformers==4.51.2 \\"))
    compiles: list[str] = []

    def counted(args: Sequence[str], **kwargs: Any) -> process.Completed:
        if list(args[1:3]) == ["pip", "compile"]:
            compiles.append(args[args.index("--output-file") + 1])
        return real_run(args, **kwargs)

    real_run = process.run
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(process, "run", counted)  # the real uv runs, and is counted
        check = envkit(
            "lock", "m", "--check", "--resolve", "--json", "--index-url", indexes.default, cwd=repo
        )
    assert check.code == 1, check.err
    assert check.json()["stale"] == [f"m/{changed}"]
    assert "resolving again gives another result" in check.out
    assert sorted(compiles) == ["cell.txt"] * 4 + ["pylock.toml"]  # 3 cells x 1, 1 cell x 2


def test_publish_index_and_to_dir(repo: Path, _locked_once: Path, tmp_path: Path) -> None:
    refused = envkit("publish", "--all", cwd=repo)
    assert refused.code == 1 and "Refusing to publish" in refused.err
    # what `envkit lock --all` leaves here: the module's lock (the same bytes, the first test)
    shutil.copytree(_locked_once / "constraints", repo / "constraints")
    res = envkit("publish", "--all", "--json", cwd=repo)
    assert res.code == 0
    index = json.loads((repo / "constraints" / "index.json").read_text())
    assert len(index["files"]) == 8
    for entry in index["files"]:
        data = (repo / "constraints" / entry["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == entry["sha256"]
        assert entry["digest"].startswith("sha256:")
    out = tmp_path / "site"
    assert envkit("publish", "m", "--to", str(out), cwd=repo).code == 0
    assert (out / "index.json").is_file() and len(list((out / "m").iterdir())) == 8


def test_interrupted_lock_never_leaves_a_half_written_file(repo: Path, indexes: Indexes) -> None:
    """Two cells (one Python, both platforms): a kill at every file of each kind (a cell's
    .txt, its pylock, lock.json), and between one cell's files and the next's."""
    profile = repo / "envs" / "m.toml"
    profile.write_text(matrix_profile([PY]))
    assert envkit("lock", "m", *lock_args(indexes), cwd=repo).code == 0
    folder = repo / "constraints" / "m"
    old = {p.name: p.read_text() for p in folder.glob("*.txt")}
    assert len(old) == 2
    profile.write_text(profile.read_text() + "# edited\n")
    envkit("show", "m", cwd=repo).assert_ok()  # its parsed TOML cached, as after any run
    # killed with each file written aside, before its rename (4 files and lock.json)
    for nth in range(1, 6):
        fault = {"ENVKIT_FAULT": f"atomic-written#{nth}=KILL"}
        killed = envkit_forked("lock", "m", "--jobs", "1", *lock_args(indexes), cwd=repo, env=fault)
        assert killed.code == -signal.SIGKILL
        assert [p for p in folder.iterdir() if p.name.endswith(".tmp")]  # left by the kill
        for path in folder.glob("*.txt"):
            text = path.read_text()
            complete = text.startswith("# envkit lock:") and "vllm==0.8.5" in text
            assert text == old[path.name] or (complete and text.endswith("\n")), path
    assert envkit("lock", "m", *lock_args(indexes), cwd=repo).code == 0
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]
    assert envkit("lock", "m", "--check", cwd=repo).code == 0


def test_build_installs_the_published_lock(locked: Path, indexes: Indexes) -> None:
    repo = locked
    # no --torch-index here: the lock says torch came from the default index, and its
    # hashes are of those files (uv's --torch-backend would ask the unreachable PyTorch index)
    args = ["--index-url", indexes.default, "--python", sys.executable]
    res = envkit("build", "m", "--json", *args, cwd=repo)
    res.assert_ok()
    data = res.json()
    assert data["lock"].endswith(f"py{PY}-linux-x86_64-cu124.txt")
    assert "--require-hashes" in data["command"] and "--torch-backend" not in data["command"]
    assert data["torch"]["source"] == "the default index, as locked"
    fresh = envkit("build", "m", "--json", "--no-lock", *build_args(indexes.default), cwd=repo)
    assert fresh.code == 0 and fresh.json()["lock"] is None


def test_lock_never_runs_the_pythons_on_path(repo: Path, indexes: Indexes, tmp_path: Path) -> None:
    """uv is told which Python to use: no interpreter on PATH (a pyenv shim, say) is run."""
    shims = tmp_path / "shims"
    shims.mkdir()
    ran = tmp_path / "ran"
    for name in ("python", "python3", f"python{PY}", f"python{OTHER}"):
        shim = shims / name
        shim.write_text(f'#!/bin/sh\necho "$0" >> "{ran}"\nexec "{sys.executable}" "$@"\n')
        shim.chmod(0o755)
    env = {"PATH": f"{shims}:{os.environ['PATH']}"}
    # a cell of each Python (this one's, and another uv could go looking for); the platform
    # is only --python-platform, which names no interpreter
    profile = repo / "envs" / "m.toml"
    profile.write_text(
        profile.read_text().replace('"linux-x86_64", "linux-aarch64"', '"linux-x86_64"')
    )
    res = envkit("lock", "m", "--json", *lock_args(indexes), cwd=repo, env=env)
    res.assert_ok()
    assert sorted(c["cell"] for c in res.json()["cells"]) == sorted(
        f"py{p}-linux-x86_64-cu124" for p in (PY, OTHER)
    )
    assert {c["state"] for c in res.json()["cells"]} == {"locked"}
    assert not ran.exists(), ran.read_text()


def test_bad_lock_arguments(repo: Path) -> None:
    assert envkit("lock", cwd=repo).code == 2
    assert envkit("lock", "m", "--all", cwd=repo).code == 2
    assert envkit("lock", "m", "--cell", "nope", "--torch-index", "default", cwd=repo).code == 2
    assert envkit("lock", "m", "--torch-index", "pypi", cwd=repo).code == 2
    assert envkit("lock", "m", "--resolve", cwd=repo).code == 2
    bad = repo / "envs" / "bad.toml"
    bad.write_text(matrix_profile([PY]).replace("linux-aarch64", "linux-arm"))
    res = envkit("matrix", "bad", cwd=repo)
    assert res.code == 2 and "did you mean 'linux-aarch64'" in res.err


def test_a_torch_build_other_than_the_backend_is_refused_and_withdrawn(
    locked: Path, indexes: Indexes
) -> None:
    """From the default index, a cell gets whatever torch build it has for the platform (on
    PyPI, the aarch64 wheels of torch 2.6.0 to 2.10.0 are CPU-only). The lock reads the
    resolved wheel's torch/version.py: a build other than the backend's is refused, written
    nowhere, recorded with its reason, and the cell's earlier files (envkit's only) go."""
    cell, repo = f"py{PY}-linux-x86_64-cu124", locked
    folder = repo / "constraints" / "m"
    txt, pylock = (
        folder / f"{cell}.txt",
        folder / f"pylock.py{PY.replace('.', '')}-linux-x86_64-cu124.toml",
    )
    assert txt.is_file() and pylock.is_file()
    txt.write_text("# my own notes, not envkit's\n")  # a file envkit did not write stays
    cpu = ["--index-url", indexes.cpu, "--torch-index", "default"]
    # the one cell: its refusal and withdrawal are the cell's own, and its neighbours stay
    res = envkit("lock", "m", "--cell", cell, "--json", *cpu, cwd=repo)
    assert res.code == 1, res.err
    states = {c["cell"]: c for c in res.json()["cells"]}
    assert list(states) == [cell] and states[cell]["state"] == "incompatible"
    reason = states[cell]["reason"]
    assert "the default index's torch 2.6.0 for linux-x86_64 is a CPU-only build" in reason
    assert "not the CUDA 12.4 build cu124 names" in reason
    assert not pylock.exists() and txt.read_text() == "# my own notes, not envkit's\n"
    recorded = json.loads((folder / "lock.json").read_text())["cells"]
    assert recorded[cell]["state"] == "incompatible" and recorded[cell]["files"] == []
    assert {c["state"] for n, c in recorded.items() if n != cell} == {"locked"}
    check = envkit("lock", "--all", "--check", "--json", cwd=repo)
    assert check.code == 1 and check.json()["stale"] == [f"m/{cell}"]
    # the same index with the CUDA build: locked again, and every cell is current
    assert envkit("lock", "m", "--cell", cell, *lock_args(indexes), cwd=repo).code == 0
    assert pylock.is_file()
    assert envkit("lock", "--all", "--check", cwd=repo).code == 0


def test_an_unreadable_torch_wheel_is_no_verdict(tmp_path: Path) -> None:
    """When the resolved torch wheel cannot be read, the lock says so and goes on."""
    from envkit.io.uv import Uv
    from envkit.lock.cells import Cell
    from envkit.lock.locker import Locker, LockOptions
    from envkit.lock.torchsource import TorchIndex

    pylock = tmp_path / "pylock.toml"
    gone = (tmp_path / "torch-2.6.0-py3-none-any.whl").as_uri()
    pylock.write_text(
        f'lock-version = "1.0"\ncreated-by = "uv"\n\n[[packages]]\nname = "torch"\n'
        f'version = "2.6.0"\nwheels = [{{ url = "{gone}" }}]\n'
    )
    said: list[str] = []
    locker = Locker(Uv(), LockOptions(torch_index=TorchIndex.parse("default")), note=said.append)
    cell = Cell(profile="m", python="3.12", platform="linux-x86_64", backend="cu124")
    assert locker._torch_build(cell, pylock, TorchIndex.parse("default")) == ""
    assert len(said) == 1 and "torch 2.6.0's build in m / py3.12-linux-x86_64-cu124" in said[0]
    assert "not checked" in said[0]


def test_uv_is_asked_its_version_once_per_binary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every lock's header names uv's version. A process that runs several locks (a test
    run, say) asks a binary once, and again once its file changed (an upgrade)."""
    from envkit.io.uv import Uv

    binary = tmp_path / "uv"  # the real uv, behind a file of its own
    binary.write_text(f'#!/bin/sh\nexec "{find_uv()}" "$@"\n')
    binary.chmod(0o755)
    asked: list[str] = []

    def counted(args: Sequence[str], **kwargs: Any) -> process.Completed:
        if list(args[1:]) == ["--version"]:
            asked.append(args[0])
        return real_run(args, **kwargs)

    real_run = process.run
    monkeypatch.setattr(process, "run", counted)  # the real uv runs, and is counted
    first = Uv(str(binary)).version()
    assert first[0].isdigit() and Uv(str(binary)).version() == first
    assert asked == [str(binary)]
    binary.write_text(f'#!/bin/sh\n# upgraded\nexec "{find_uv()}" "$@"\n')
    assert Uv(str(binary)).version() == first and asked == [str(binary)] * 2


def test_git_status_lists_only_the_locks(repo: Path, indexes: Indexes) -> None:
    """In a git repository, lock and publish leave nothing but their outputs to commit:
    envkit's file locks are in a folder of its own whose .gitignore ignores it."""
    from envkit.lock.cells import FILE_LOCKS

    # one cell: what a lock leaves is each cell's two files, lock.json and the file locks
    one = matrix_profile([PY]).replace('"linux-x86_64", "linux-aarch64"', '"linux-x86_64"')
    (repo / "envs" / "m.toml").write_text(one)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "envs"], check=True)
    subprocess.run([*git, "commit", "-qm", "profile"], check=True)
    envkit("lock", "m", *lock_args(indexes), cwd=repo).assert_ok()
    envkit("publish", "m", cwd=repo).assert_ok()
    status = subprocess.run(
        [*git, "status", "--porcelain", "--untracked-files=all"],
        check=True, capture_output=True, text=True,
    ).stdout.splitlines()  # fmt: skip
    listed = sorted(line[3:] for line in status)
    cells = [(PY, "linux-x86_64")]
    assert all(line.startswith("?? ") for line in status)
    assert listed == sorted(
        [
            "constraints/index.json",
            "constraints/m/lock.json",
            *(f"constraints/m/py{p}-{plat}-cu124.txt" for p, plat in cells),
            *(
                f"constraints/m/pylock.py{p.replace('.', '')}-{plat}-cu124.toml"
                for p, plat in cells
            ),
        ]
    )
    # the file locks are there, for the next writer, only ignored
    assert (repo / "constraints" / "m" / FILE_LOCKS / ".lock.json.lock").is_file()
    assert (repo / "constraints" / FILE_LOCKS / ".index.json.lock").is_file()
