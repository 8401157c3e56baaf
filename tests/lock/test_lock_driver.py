"""Every lock cell states the NVIDIA driver it needs: a header line in each published file,
``driver`` in lock.json, index.json and the lock / matrix JSON; the shipped locks too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envkit.io.uv import Uv
from envkit.lock.cells import Cell, CellState, CellStatus, Manifest
from envkit.lock.locker import Locker, LockOptions
from envkit.lock.pylocks import validate_file

from conftest import Indexes
from helpers import PY, ROOT, envkit, lock_args, matrix_profile, output

NEEDS_124 = "# needs: CUDA 12.4 or newer (NVIDIA driver 550.54.14 or newer)\n"
DRIVER_124 = {"cuda": "12.4", "linux_driver": "550.54.14", "minor_compat_floor": "525.60.13"}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "m.toml").write_text(matrix_profile([PY]))
    return tmp_path


def header(path: Path) -> list[str]:
    lines = path.read_text().splitlines(keepends=True)
    return [ln for ln in lines[:12] if ln.startswith("#")]


def test_each_lock_file_and_record_states_the_driver(repo: Path, indexes: Indexes) -> None:
    locked = envkit("lock", "m", "--json", *lock_args(indexes), cwd=repo)
    assert all(c["driver"] == DRIVER_124 for c in output("lock", locked.assert_ok().out)["cells"])
    folder = repo / "constraints" / "m"
    for path in sorted(folder.glob("*.t*")):  # the constraints and the pylocks
        assert NEEDS_124 in header(path), path
    for pylock in folder.glob("pylock.*.toml"):
        validate_file(pylock)  # the header line is part of the bytes packaging reads
    manifest = json.loads((folder / "lock.json").read_text())
    assert {c["cell"]: c["driver"] for c in manifest["cells"].values()} == {
        f"py{PY}-linux-x86_64-cu124": DRIVER_124,
        f"py{PY}-linux-aarch64-cu124": DRIVER_124,
    }
    matrix = output("matrix", envkit("matrix", "m", "--json", cwd=repo).assert_ok().out)
    assert {c["state"] for c in matrix["cells"]} == {"locked"}
    assert all(c["driver"] == DRIVER_124 for c in matrix["cells"])
    check = output("lock-check", envkit("lock", "m", "--check", "--json", cwd=repo).out)
    assert check["ok"] and all(c["driver"] == DRIVER_124 for c in check["cells"])
    published = envkit("publish", "--all", "--json", cwd=repo)
    assert all(f["driver"] == DRIVER_124 for f in output("publish", published.out)["files"])
    index = json.loads((repo / "constraints" / "index.json").read_text())
    assert len(index["files"]) == 4 and all(f["driver"] == DRIVER_124 for f in index["files"])
    # the same bytes when locked and published again
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    envkit("lock", "m", *lock_args(indexes), cwd=repo).assert_ok()
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before


def test_other_profiles_entries_in_index_json_gain_their_driver(
    repo: Path, indexes: Indexes
) -> None:
    """An index.json from before (no ``driver``) keeps the other profiles' entries, each
    with the driver its cell's backend needs."""
    one = matrix_profile([PY]).replace('"linux-x86_64", "linux-aarch64"', '"linux-x86_64"')
    (repo / "envs" / "m.toml").write_text(one)  # one cell to publish beside them is enough
    envkit("lock", "m", *lock_args(indexes), cwd=repo).assert_ok()
    old = {
        "profile": "other",
        "state": "locked",
        "sha256": "0" * 64,
        "digest": "sha256:" + "1" * 64,
    }
    previous = {
        "format": 1,
        "files": [
            {**old, "cell": "py3.12-linux-x86_64-cu128", "file": "other/a.txt"},
            {**old, "cell": "py3.12-linux-x86_64-cpu", "file": "other/b.txt"},
        ],
    }
    (repo / "constraints" / "index.json").write_text(json.dumps(previous))
    envkit("publish", "m", cwd=repo).assert_ok()
    entries = json.loads((repo / "constraints" / "index.json").read_text())["files"]
    kept = {e["file"]: e["driver"] for e in entries if e["profile"] == "other"}
    assert kept["other/a.txt"] == {
        "cuda": "12.8",
        "linux_driver": "570.26",
        "minor_compat_floor": "525.60.13",
    }
    assert kept["other/b.txt"] is None


@pytest.mark.parametrize(
    ("backend", "line"),
    [
        ("cu130", "# needs: CUDA 13.0 or newer (NVIDIA driver 580.65.06 or newer)\n"),
        ("cpu", "# needs: no GPU driver (a CPU build)\n"),
        ("rocm6.2", "# needs: no NVIDIA driver (a rocm6.2 build)\n"),
        ("", None),  # no backend: the index decides, and the header says nothing
    ],
)
def test_the_header_line_per_backend(backend: str, line: str | None) -> None:
    from envkit.profiles.profile import parse_profile

    profile = parse_profile(
        'python = "3.12"\nrequirements = ["vllm"]\n', path=Path("envs/p.toml"), name="p"
    )
    locker = Locker(Uv("uv"), LockOptions())
    locker._uv_version = "0.0.0"
    cell = Cell(profile="p", python="3.12", platform="linux-x86_64", backend=backend)
    state = CellState(cell=cell, status=CellStatus.LOCKED)
    text = locker.header(profile, cell, state, "sha256:" + "0" * 64)
    if line is None:
        assert "# needs:" not in text
    else:
        assert text.splitlines(keepends=True)[5] == line
    driver = state.to_dict()["driver"]
    assert (driver is not None) == backend.startswith("cu")


def test_the_shipped_locks_state_the_driver_of_their_backend() -> None:
    """Every committed lock file, lock.json and index.json entry says what its cell needs:
    locks from before the driver line would fail here (lock --all, then publish --all)."""
    from envkit.gpu.needs import backend_summary, for_backend

    root = ROOT / "constraints"
    index = json.loads((root / "index.json").read_text())["files"]
    assert len(index) >= 20
    for entry in index:
        backend = entry["cell"].rsplit("-", 1)[-1]
        need = for_backend(backend)
        assert entry["driver"] == (need.to_dict() if need else None), entry
        assert f"# needs: {backend_summary(backend)}\n" in header(root / entry["file"])
    for path in sorted(root.glob("*/lock.json")):
        manifest = Manifest.read(path)
        assert manifest is not None and manifest.cells
        raw = json.loads(path.read_text())["cells"]
        for name, entry in raw.items():
            need = for_backend(entry["backend"])
            assert entry["driver"] == (need.to_dict() if need else None), (path, name)
