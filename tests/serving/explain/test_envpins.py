"""serving.explain.envpins: the vLLM, transformers and torch a venv holds, read from its
dist-info files, each install counted once however many paths lead to it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bootlogs import FAILURES, log

from envkit.io.uv import find_uv
from envkit.serving.explain.envpins import from_venv

import wheelhouse
from helpers import envkit, install_into


def _uv_venv_with_torch(tmp_path: Path) -> Path:
    """A real uv venv holding one tiny torch wheel, with uv's ``lib64 -> lib`` link."""
    house = tmp_path / "house"
    house.mkdir()
    index = wheelhouse.write_index(
        house, [wheelhouse.Wheel("torch", "2.6.0", {"torch/__init__.py": "x = 1\n"})]
    )
    venv = tmp_path / ".venv"
    uv = find_uv()
    subprocess.run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    install_into(venv, index, "torch==2.6.0")
    lib64 = venv / "lib64"
    if not lib64.exists():  # uv makes it on some Pythons only: make it as uv does
        lib64.symlink_to("lib")
    assert lib64.is_symlink() and len(list(venv.glob("lib*/python3*/site-packages"))) == 2
    return venv


def test_one_install_seen_through_lib64_is_one(tmp_path: Path) -> None:
    venv = _uv_venv_with_torch(tmp_path)
    found = from_venv(venv)
    assert found.versions == {"torch": "2.6.0"} and found.copies == {}
    # and explain --venv says no mixed install
    path = tmp_path / "boot.log"
    path.write_text(log(FAILURES["cuda-oom"]))
    res = envkit("explain", str(path), "--venv", str(venv), "--json", cwd=tmp_path)
    notes = res.json()["environment"]["notes"]
    assert not [n for n in notes if "mixed install" in n], notes


def test_two_real_installs_are_still_two(tmp_path: Path) -> None:
    """A second site-packages that is a folder of its own (not a link) is a mixed install."""
    venv = _uv_venv_with_torch(tmp_path)
    (venv / "lib64").unlink()
    real = next(venv.glob("lib/python3*/site-packages"))
    other = venv / "lib64" / real.parent.name / "site-packages" / "torch-2.5.1.dist-info"
    other.mkdir(parents=True)
    (other / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.5.1\n\n")
    found = from_venv(venv)
    assert found.copies == {"torch": ("2.6.0", "2.5.1")}


def test_a_hard_link_or_bind_of_the_same_dist_info_is_one(tmp_path: Path) -> None:
    """Two site-packages paths to one folder (here a link to the folder itself) are one."""
    venv = tmp_path / "v"
    site = venv / "lib" / "python3.12" / "site-packages"
    info = site / "vllm-0.8.5.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.8.5\n\n")
    (venv / "lib64" / "python3.12").mkdir(parents=True)
    (venv / "lib64" / "python3.12" / "site-packages").symlink_to(site)
    assert from_venv(venv).copies == {}
