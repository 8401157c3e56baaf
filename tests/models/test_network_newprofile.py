"""new-profile against the real index: drafts for held-out models that lock and build.

Run with ``python -m pytest -m network`` (the build holds several GB while it runs).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from envkit.profiles.profile import load_profile

from helpers import FIXTURES, envkit

MODELS = FIXTURES / "models"
pytestmark = pytest.mark.network


def test_a_draft_for_qwen2_vl_on_vllm_085_locks_and_builds(tmp_path: Path) -> None:
    envs = tmp_path / "envs"
    drafted = envkit(
        "--envs", str(envs), "new-profile", "q2vl", "--for-model",
        str(MODELS / "Qwen2-VL-2B-Instruct"), "--vllm", "0.8.5", "--json", cwd=tmp_path,
    )  # fmt: skip
    drafted.assert_ok()
    solution = drafted.json()["solution"]
    assert (solution["vllm"], solution["transformers"]) == ("0.8.5", "4.51.3")
    profile = load_profile(envs / "q2vl.toml")
    assert profile.torch.backend == "cu124"  # torch 2.6.0 as the default index builds it
    assert "Qwen2_5OmniModel" in profile.models.transformers_bounds
    locked = envkit(
        "--envs", str(envs), "lock", "q2vl", "--torch-index", "default", "--json", cwd=tmp_path
    )  # fmt: skip
    locked.assert_ok()
    assert {c["state"] for c in locked.json()["cells"]} <= {"locked", "source-only"}
    cache = os.environ.get("ENVKIT_TEST_UV_CACHE", str(Path.home() / ".cache/uv"))
    try:
        built = envkit(
            "--envs", str(envs), "build", "q2vl", "--torch-index", "default", "--json",
            cwd=tmp_path, env={"UV_CACHE_DIR": cache},
        )  # fmt: skip
        built.assert_ok()
        checks = {(c["kind"], c["name"]): c for c in built.json()["verify"]["checks"]}
        assert checks[("compat", "vllm 0.8.5 + transformers 4.51.3")]["status"] == "pass"
    finally:
        shutil.rmtree(tmp_path / ".venv", ignore_errors=True)


def test_the_newest_set_for_qwen35_locks(tmp_path: Path) -> None:
    envs = tmp_path / "envs"
    drafted = envkit(
        "--envs", str(envs), "new-profile", "q35", "--for-model", str(MODELS / "Qwen3.5-9B"),
        "--json", cwd=tmp_path,
    )  # fmt: skip
    drafted.assert_ok()
    locked = envkit(
        "--envs", str(envs), "lock", "q35", "--torch-index", "default", "--json", cwd=tmp_path
    )  # fmt: skip
    locked.assert_ok()


def test_report_1_from_a_folder_of_ones_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk of field report 1 from a folder without envs/: the draft goes to the user's
    profile folder, and lock, matrix and check-model of it work from where the user is."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    here = tmp_path / "vllm"
    (here / "models").mkdir(parents=True)
    model = here / "models" / "Qwen3.5-4B"
    shutil.copytree(MODELS / "Qwen3.5-9B", model)
    drafted = envkit("new-profile", "qwen3.5-4b", "--for-model", str(model), cwd=here)
    drafted.assert_ok()
    user = tmp_path / "data" / "envkit"
    assert (user / "envs" / "qwen3.5-4b.toml").is_file() and not (here / "envs").exists()
    assert "envkit lock qwen3.5-4b" in " ".join(drafted.out.split())
    locked = envkit("lock", "qwen3.5-4b", "--torch-index", "default", "--json", cwd=here)
    locked.assert_ok()
    assert locked.json()["profiles"][0]["locks"] == str(user / "constraints" / "qwen3.5-4b")
    matrix = envkit("matrix", "--envs", str(user / "envs"), "qwen3.5-4b", "--json", cwd=here)
    assert {c["state"] for c in matrix.json()["cells"]} == {"locked"}
    checked = envkit("check-model", "qwen3.5-4b", str(model), cwd=here)
    checked.assert_ok()
