"""The real thing: vllm 0.8.5 from the package index (about 30 s cold, 7.6 GB on disk).

Run with ``python -m pytest -m network``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers import ROOT, envkit

pytestmark = pytest.mark.network


@pytest.fixture
def real_env(tmp_path: Path):  # type: ignore[no-untyped-def]
    # The real uv cache, not the tests' empty one: the point is the real index and wheels.
    env = {"UV_CACHE_DIR": os.environ.get("ENVKIT_TEST_UV_CACHE", str(Path.home() / ".cache/uv"))}
    yield env
    shutil.rmtree(tmp_path / ".venv", ignore_errors=True)  # several GB


def test_real_vllm_085_build(tmp_path: Path, real_env: dict[str, str]) -> None:
    args = [
        "build",
        str(ROOT / "envs" / "vllm-0.8.5+qwen2-vl.toml"),
        "--torch-index",
        "default",
        "--json",
    ]
    # the profile wants Python 3.12: envkit finds one (PATH, pyenv, uv's) or says where it looked
    res = envkit(*args, "--python", "3.12", cwd=tmp_path, env=real_env)
    assert res.code == 0, res.err[-3000:] + res.out[-3000:]
    data = res.json()
    found = {(c["kind"], c["name"]): c for c in data["verify"]["checks"]}
    assert found["version", "transformers"]["found"] == "4.51.3"
    assert found["version", "torch"]["found"] == "2.6.0"
    assert found["torch", "torch.version.cuda"]["found"] == "12.4"
    assert found["import", "vllm"]["ok"]
    assert found["probe", "transformers.PreTrainedTokenizerBase.all_special_tokens_extended"]["ok"]
    venv = tmp_path / ".venv"
    # an independent look, with the venv's own python, after the move into place
    out = subprocess.run(
        [
            str(venv / "bin/python"),
            "-c",
            "import json, transformers, torch, vllm; print(json.dumps([transformers.__version__,"
            " transformers.__file__, torch.__version__, torch.version.cuda, vllm.__version__]))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    version, file, torch_version, cuda, vllm_version = json.loads(out.stdout.splitlines()[-1])
    assert (version, cuda, vllm_version) == ("4.51.3", "12.4", "0.8.5")
    assert torch_version.split("+")[0] == "2.6.0"  # the wheel says 2.6.0+cu124
    assert file.startswith(str(venv))
    # the console script written in the build folder still runs from the venv's real path
    cli = subprocess.run(
        [str(venv / "bin/vllm"), "--help"], capture_output=True, text=True, timeout=300
    )
    assert cli.returncode == 0, cli.stderr[-2000:]
    assert "serve" in cli.stdout
    # vLLM's compiled kernels link against the torch built beside them
    kernels = found["kernels", "vllm"]
    assert kernels["status"] == "pass" and "need 120 torch symbols" in kernels["found"]
    # and have images for Volta to Hopper, none for Blackwell (vLLM 0.8.5: sm_70..sm_90)
    assert data["verify"]["gpu"]["runs_on"] == [
        "7.0",
        "7.2",
        "7.5",
        "8.0",
        "8.6",
        "8.7",
        "8.9",
        "9.0",
    ]
    profile = str(ROOT / "envs" / "vllm-0.8.5+qwen2-vl.toml")
    for card, code in (("v100-16gb", 0), ("a100-80gb", 0), ("h100-80gb", 0), ("rtx-5090", 1)):
        on = envkit("verify", profile, "--venv", str(venv), "--gpu", card, "--json", cwd=tmp_path)
        assert on.code == code, (card, on.out[-2000:])
        failed = sorted(c["name"] for c in on.json()["checks"] if c["status"] == "fail")
        expected = ["torch/lib/libtorch_cuda.so", "vllm/_C.abi3.so", "vllm/_moe_C.abi3.so"]
        assert failed == (expected if code else []), card
    # torch 2.7.0 (built with the new C++ ABI) in place of 2.6.0, as `pip install -U torch`
    # would leave it: nothing fails on import here, yet vLLM's kernels could not load
    from envkit.io.uv import find_uv

    swap = [
        find_uv(),
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        "--python",
        str(venv / "bin/python"),
    ]
    subprocess.run([*swap, "torch==2.7.0"], check=True, env={**os.environ, **real_env})
    res = envkit("verify", str(ROOT / "envs" / "vllm-0.8.5+qwen2-vl.toml"), "--venv", str(venv),
                 "--json", cwd=tmp_path)  # fmt: skip
    assert res.code == 1
    (kernels,) = [
        c for c in res.json()["checks"]
        if c["kind"] == "kernels" and c["name"].startswith("vllm/") and c["status"] == "fail"
    ]  # fmt: skip
    assert kernels["found"] == "kernels-do-not-link"
    assert "c10" in kernels["detail"] and "Ss" in kernels["detail"]  # the old ABI's std::string
