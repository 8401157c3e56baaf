"""PEP 751 done right: every pylock carries its cell's environments and requires-python, is
valid for packaging.pylock, and is refused by uv and packaging on a machine it is not for."""

from __future__ import annotations

import json
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.pylock import PylockSelectError

from envkit.io.uv import find_uv
from envkit.lock.pylocks import validate_file

from conftest import Indexes
from helpers import OTHER, PY, ROOT, locked_matrix


@pytest.fixture(scope="module")
def _locked_once(tmp_path_factory: pytest.TempPathFactory, indexes: Indexes) -> Path:
    """``envkit lock m`` of a 4-cell profile, once a run (helpers.locked_matrix)."""
    return locked_matrix(tmp_path_factory, indexes)


@pytest.fixture
def pylocks(tmp_path: Path, _locked_once: Path) -> Path:
    """The pylocks of ``envkit lock m``, locked once for the module and copied for each test
    (a lock writes the same bytes each time, tests/lock/test_lock.py)."""
    shutil.copytree(_locked_once, tmp_path, dirs_exist_ok=True)
    return tmp_path / "constraints" / "m"


def name(python: str, plat: str) -> str:
    return f"pylock.py{python.replace('.', '')}-{plat}-cu124.toml"


def test_each_pylock_names_its_environment_and_python(pylocks: Path) -> None:
    lock = validate_file(pylocks / name(PY, "linux-aarch64"))
    assert lock.environments is not None and len(lock.environments) == 1
    assert 'platform_machine == "aarch64"' in str(lock.environments[0])
    assert str(lock.requires_python) == f"=={PY}.*"


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the right target is x86_64 here")
def test_packaging_selects_only_on_the_right_target(pylocks: Path) -> None:
    here = default_environment()
    right = validate_file(pylocks / name(PY, "linux-x86_64"))
    assert [p.name for p, _d in right.select(environment=here)]  # this machine: installs
    for wrong in (name(PY, "linux-aarch64"), name(OTHER, "linux-x86_64")):
        with pytest.raises(PylockSelectError):
            list(validate_file(pylocks / wrong).select(environment=here))


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the right target is x86_64 here")
def test_uv_installs_only_on_the_right_target(pylocks: Path, tmp_path: Path) -> None:
    def dry_run(lock: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [find_uv(), "pip", "install", "--dry-run", "--python", sys.executable,
             "--offline", "-r", str(pylocks / lock)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip

    assert dry_run(name(PY, "linux-x86_64")).returncode == 0
    refused = dry_run(name(PY, "linux-aarch64"))
    assert refused.returncode != 0 and "environment" in refused.stderr.lower()


def test_every_shipped_pylock_is_valid() -> None:
    shipped = sorted((ROOT / "constraints").rglob("pylock.*.toml"))
    index = json.loads((ROOT / "constraints" / "index.json").read_text())
    published = {
        f["file"] for f in index["files"] if f["file"].split("/")[-1].startswith("pylock.")
    }
    # every pylock on disk is published and the other way round: none left from a withdrawn cell
    assert {p.relative_to(ROOT / "constraints").as_posix() for p in shipped} == published
    assert len(shipped) >= 10
    for path in shipped:
        lock = validate_file(path)
        assert lock.environments and lock.requires_python, path
