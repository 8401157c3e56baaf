"""new-profile solves for the GPU and the driver: the vLLM release and its torch's default
build must have kernel images for the GPU's compute capability (envkit's shipped table of the
published wheels) and a CUDA the driver runs; when nothing fits, exit 1 names why and the
least CUDA (and driver) at which a solution exists. The world's releases are real release
numbers, so the shipped table's facts about them apply."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from envkit.gpu.installed import detect

import indexserver
from helpers import ROOT, envkit, output
from indexserver import url
from registry_world import MODELS

QWEN35 = MODELS / "Qwen3.5-9B"
QWEN2VL = MODELS / "Qwen2-VL-2B-Instruct"


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(detect, "smi", lambda: detect.Smi(present=False))


def new(folder: Path, world: indexserver.Server, model: Path, *args: str) -> Any:
    return envkit(
        "--envs", str(folder), "new-profile", "g", "--for-model", str(model),
        "--index-url", url(world), "--force", "--json", *args, cwd=folder.parent,
    )  # fmt: skip


def test_a_blackwell_card_gets_builds_with_its_kernels(
    world: indexserver.Server, tmp_path: Path
) -> None:
    res = new(tmp_path / "envs", world, QWEN35, "--gpu", "rtx-5090")
    solution = output("new-profile", res.assert_ok().out)["solution"]
    assert (solution["vllm"], solution["gpu"]) == ("0.33.0", "12.0")
    assert "vLLM 0.33.0 has kernel images for 12.0" in solution["gpu_note"]
    assert "torch 2.14.0 (CUDA 13.0) has kernel images for 12.0" in solution["gpu_note"]
    # vLLM 0.8.5 (and torch 2.6.0's default build) carry no sm_120
    old = new(tmp_path / "envs", world, QWEN2VL, "--vllm", "0.8.5", "--gpu", "rtx-5090")
    old.assert_fails(1, mentioning="vllm 0.8.5: its _C.abi3.so has no kernel image for 12.0")
    assert (
        not (tmp_path / "envs" / "g.toml").exists()
        or "0.8.5" not in (tmp_path / "envs" / "g.toml").read_text()
    )


def test_a_volta_card_never_gets_a_cuda_13_build(world: indexserver.Server, tmp_path: Path) -> None:
    res = new(tmp_path / "envs", world, QWEN35, "--compute-capability", "7.0")
    res.assert_fails(1, mentioning=("kernels for compute capability 7.0", "vllm 0.33.0: its "))
    assert "has no kernel image for 7.0" in res.json()["message"]
    older = new(tmp_path / "envs", world, QWEN2VL, "--gpu", "v100-32gb")
    solution = output("new-profile", older.assert_ok().out)["solution"]
    assert solution["vllm"] != "0.33.0" and solution["gpu"] == "7.0"
    assert solution["cuda"].startswith("12.")


def test_a_driver_too_old_names_the_least_cuda_and_driver(
    world: indexserver.Server, tmp_path: Path
) -> None:
    res = new(tmp_path / "envs", world, QWEN35, "--gpu", "h100-80gb", "--driver", "550.54.14")
    res.assert_fails(1)
    message = res.json()["message"]
    assert "it runs CUDA 12.4 at most" in message
    assert message.endswith(
        "Qwen3_5ForConditionalGeneration first appears in vLLM 0.33.0 (of the releases with "
        "kernels for 9.0), whose torch 2.14.0 needs CUDA 13.0 (NVIDIA driver 580.65.06 or newer)."
    )
    assert "A newer NVIDIA driver runs newer CUDA builds" in res.json()["hint"]


def test_without_a_gpu_the_draft_says_which_gpus_it_needs(
    world: indexserver.Server, tmp_path: Path
) -> None:
    folder = tmp_path / "envs"
    data = output("new-profile", new(folder, world, QWEN35).assert_ok().out)
    note = data["solution"]["gpu_note"]
    assert data["solution"]["gpu"] is None
    assert note.startswith("vLLM 0.33.0 and its torch's default build have kernels for compute")
    assert "7.5" in note and "12.0" in note and "7.0," not in note
    text = envkit(
        "--envs", str(folder), "new-profile", "g", "--for-model", str(QWEN35),
        "--index-url", url(world), "--force", cwd=tmp_path,
    ).assert_ok().out  # fmt: skip
    assert "warning: no GPU was named or found" in " ".join(text.split())


def test_check_model_which_and_plan_refuse_builds_without_kernels_for_the_gpu(
    tmp_path: Path,
) -> None:
    """The shipped profiles, offline: vLLM 0.8.5's and 0.9.2's builds have no sm_120, vLLM
    0.33.0's (CUDA 13) no sm_70; each says why, with what the build holds."""
    shipped = ("--envs", str(ROOT / "envs"))
    offline = {"UV_DEFAULT_INDEX": "http://127.0.0.1:9/simple"}
    blackwell = envkit(*shipped, "which", str(QWEN2VL), "--gpu", "rtx-5090", "--json",
                       cwd=tmp_path, env=offline)  # fmt: skip
    data = output("which", blackwell.assert_ok().out)
    assert data["gpu"] == "compute capability 12.0 (GeForce RTX 5090), from --gpu rtx-5090"
    assert set(data["supported_by"]) == {"vllm-0.17.1+qwen3.5", "vllm-0.33.0"}
    old = {p["profile"]: p for p in data["profiles"]}["vllm-0.8.5+qwen2-vl"]
    (first, second) = (p for p in old["problems"] if p["code"] == "no-kernel-image")
    assert first["message"].startswith("vLLM 0.8.5's _C.abi3.so has no kernel image for 12.0")
    assert "sm_70, sm_75, sm_80, sm_86, sm_89, sm_90" in first["message"]
    assert second["message"].startswith("torch 2.6.0 (CUDA 12.4)'s libtorch_cuda.so")
    assert "--compute-capability 12.0" in first["fix"] and "vLLM 0.10.2 to" in first["fix"]
    volta = envkit(*shipped, "check-model", "vllm-0.33.0", str(QWEN2VL), "--gpu", "v100-16gb",
                   cwd=tmp_path, env=offline)  # fmt: skip
    volta.assert_fails(1, mentioning="has no kernel image for 7.0")
    fine = envkit(*shipped, "check-model", "vllm-0.8.5+qwen2-vl", str(QWEN2VL),
                  "--compute-capability", "7.0", cwd=tmp_path, env=offline)  # fmt: skip
    fine.assert_ok()
    plan = (*shipped, "plan", "vllm-0.8.5+qwen2-vl", str(QWEN2VL), "--json")
    refused = envkit(*plan, "--gpu", "rtx-5090", cwd=tmp_path, env=offline)
    assert refused.code == 1 and refused.json()["command"] in ("", None)
    envkit(*plan, "--gpu", "rtx-4090", cwd=tmp_path, env=offline).assert_ok()


def test_a_driver_alone_limits_the_cuda(world: indexserver.Server, tmp_path: Path) -> None:
    """--driver without a GPU says which CUDA runs (NVIDIA's table), not which kernels: a
    550 driver (CUDA 12.4) cannot run the CUDA 13.0 build Qwen3.5's only release pins."""
    res = new(tmp_path / "envs", world, QWEN35, "--driver", "550.54.14")
    res.assert_fails(1, mentioning="it runs CUDA 12.4 at most")
    assert res.json()["message"].endswith(
        "whose torch 2.14.0 needs CUDA 13.0 (NVIDIA driver 580.65.06 or newer)."
    )
    fine = new(tmp_path / "envs", world, QWEN35, "--driver", "580.95.05")
    assert output("new-profile", fine.assert_ok().out)["solution"]["driver_cuda"] == "13.0"
    envkit("verify", "vllm-0.8.5+qwen2-vl", "--driver", "550.54.14", cwd=tmp_path).assert_fails(
        2, mentioning="--driver needs a GPU to check"
    )
