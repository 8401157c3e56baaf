"""verify on a venv whose FlashInfer distributions are at two releases: the ``companions``
check names them and gives the ``uv pip install`` for that venv, which mends it."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from envkit.io.uv import find_uv

import wheelhouse
from helpers import PY, envkit, install_into


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> str:
    return wheelhouse.write_index(
        tmp_path_factory.mktemp("flashinfer-verify"),
        [
            wheelhouse.flashinfer("flashinfer-python", "0.6.14"),
            wheelhouse.flashinfer("flashinfer-cubin", "0.6.13"),
            wheelhouse.flashinfer("flashinfer-cubin", "0.6.14"),
            wheelhouse.flashinfer("flashinfer-jit-cache", "0.6.14+cu130"),
        ],
    )


def checks(res) -> dict:  # type: ignore[no-untyped-def,type-arg]
    return {(c["kind"], c["name"]): c for c in res.json()["checks"]}


def test_a_mismatched_trio_fails_verify_and_its_fix_mends_it(tmp_path: Path, index: str) -> None:
    (tmp_path / "envs").mkdir()
    profile = tmp_path / "envs" / "fi.toml"
    profile.write_text(f'python = "{PY}"\nrequirements = ["flashinfer-python==0.6.14"]\n')
    venv = tmp_path / "venv"
    subprocess.run([find_uv(), "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    install_into(venv, index, "flashinfer-python==0.6.14")
    install_into(venv, index, "flashinfer-jit-cache==0.6.14")  # +cu130: the same release
    only_two = envkit("verify", "fi", "--venv", str(venv), "--json", cwd=tmp_path)
    assert only_two.code == 0, only_two.out
    found = checks(only_two)[("companions", "FlashInfer")]
    assert (found["status"], found["found"]) == (
        "pass",
        "flashinfer-python 0.6.14, flashinfer-jit-cache 0.6.14+cu130",
    )
    install_into(venv, index, "flashinfer-cubin==0.6.13")
    res = envkit("verify", "fi", "--venv", str(venv), "--json", cwd=tmp_path)
    assert res.code == 1
    check = checks(res)[("companions", "FlashInfer")]
    assert check["status"] == "fail"
    assert check["found"] == (
        "flashinfer-python 0.6.14, flashinfer-cubin 0.6.13, flashinfer-jit-cache 0.6.14+cu130"
    )
    command = f"uv pip install --python {venv / 'bin' / 'python'} flashinfer-cubin==0.6.14"
    assert check["fix"].startswith(command)
    assert f"in profile fi ({profile}), add `flashinfer-cubin==0.6.14`" in check["fix"]
    text = envkit("verify", "fi", "--venv", str(venv), cwd=tmp_path)
    assert text.code == 1 and "flashinfer-cubin==0.6.14" in text.out + text.err
    # the fix as given (uv found as envkit finds it; the test index for the offline suite)
    argv = shlex.split(command)
    subprocess.run([find_uv(), *argv[1:], "-q", "--default-index", index], check=True)
    again = envkit("verify", "fi", "--venv", str(venv), "--json", cwd=tmp_path)
    assert again.code == 0
    assert checks(again)[("companions", "FlashInfer")]["status"] == "pass"
