"""Synthetic nodes for the fleet tests: fingerprints of the shipped cell's exact versions, and
fake nvidia-smi programs (written here, one GPU each) for nodes of a local Ray cluster."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from envkit.lock.pylocks import load as toml_data

ROOT = Path(__file__).resolve().parent.parent.parent
SHIPPED = "vllm-0.8.5+qwen2-vl"
CELL = "py3.12-linux-x86_64-cu124"
PYLOCK = ROOT / "constraints" / SHIPPED / "pylock.py312-linux-x86_64-cu124.toml"

A100 = ("NVIDIA A100-SXM4-80GB", "550.54.15", 81920, "8.0", "12.4")
P100 = ("Tesla P100-PCIE-16GB", "520.61.05", 16384, "6.0", "11.8")
GH200 = ("NVIDIA GH200 480GB", "570.124.06", 97871, "9.0", "12.8")


def locked_versions(pylock: Path = PYLOCK) -> dict[str, str]:
    return dict(_locked_versions(pylock))


@functools.cache  # the lock does not change while the tests run; each caller gets a copy
def _locked_versions(pylock: Path) -> dict[str, str]:
    data = toml_data(pylock.read_text())
    return {p["name"]: p["version"] for p in data["packages"]}


def fingerprint(
    host: str,
    gpu: tuple[str, str, int, str, str] | None = A100,
    *,
    python: str = "3.12.3",
    versions: dict[str, str] | None = None,
    variables: dict[str, str] | None = None,
    platform: str = "linux-x86_64",
) -> dict[str, Any]:
    """A fingerprint document as `envkit fingerprint --json` writes it."""
    found = locked_versions() if versions is None else versions
    name, driver, memory, capability, cuda = gpu or ("", "", 0, "", "")
    body = {
        "format": 1,
        "host": host,
        "platform": platform,
        "machine": platform.removeprefix("linux-"),
        "python": python,
        "environment": "/srv/vllm/.venv",
        "gpus": [
            {"index": i, "name": name, "compute_capability": capability, "memory": memory * 2**20}
            for i in range(2 if gpu else 0)
        ],
        "driver": driver or None,
        "driver_cuda": cuda or None,
        "gpu_problem": "" if gpu else "nvidia-smi is not on PATH",
        "distributions": [
            {"name": n, "version": v, "files": "intact", "modified": []}
            for n, v in sorted(found.items())
        ],
        "ray": None,
        "shm": 64 * 2**30,
        "infiniband": ["/sys/class/infiniband/mlx5_0", "/dev/infiniband/uverbs0"],
        "variables": variables or {"NCCL_DEBUG": "WARN"},
    }
    return {"envkit": 1, "ok": True, "fingerprint": body}


def write(folder: Path, name: str, document: dict[str, Any]) -> Path:
    path = folder / f"{name}.json"
    path.write_text(json.dumps(document))
    return path


def fake_smi(folder: Path, gpu: tuple[str, str, int, str, str]) -> Path:
    """A folder holding an ``nvidia-smi`` that reports ``gpu`` (for a node's PATH)."""
    name, driver, memory, capability, cuda = gpu
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'case "$1" in --query-gpu=*)\n'
        f"  echo '{name}, {driver}, {memory}, {memory - 512}, {capability}'; exit 0;;\n"
        "esac\n"
        f"echo '| NVIDIA-SMI {driver}   Driver Version: {driver}   CUDA Version: {cuda}     |'\n"
    )
    script.chmod(0o755)
    return folder
