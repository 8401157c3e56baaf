"""Field report 1 as a new user walks it, from a folder of their own, timed step by step:
draft a profile for the model, lock it, look at its matrix, check the model against it, the
history of its model type (cold: an empty envkit cache, then warm), and with --build the
build and verify of the draft. Each step is ``python -m envkit ...`` in a new process, as a
user runs it. Run by hand (needs the package index; --build ~10 GB disk and the network):

    python benchmarks/newuser_flow.py --model tests/fixtures/models/Qwen3.5-9B [--build]
    python benchmarks/newuser_flow.py --model tests/fixtures/models/Qwen2-VL-2B-Instruct \
        --name qwen2-vl --model-type qwen2_vl --vllm 0.8.5 --build
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import describe  # benchmarks/machine.py, beside this script


def step(args: list[str], cwd: Path, env: dict[str, str]) -> dict[str, object]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "envkit", *args],
        cwd=cwd, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    print(f"{seconds:7.2f} s  exit {done.returncode}  envkit {' '.join(args)}", file=sys.stderr)
    return {"command": ["envkit", *args], "seconds": round(seconds, 2), "exit": done.returncode}


def kernels(venv: Path) -> dict[str, object]:
    """verify's GPU layer alone, in this process: every compiled module's fatbins, NEEDED
    entries and torch symbols (gpu/installed/assess.py), with no GPU named."""
    from envkit.gpu.installed.assess import assess

    site = next((venv / "lib").glob("python3*/site-packages"))
    start = time.perf_counter()
    found = assess(site)
    seconds = time.perf_counter() - start
    vllm = (
        next((p for p in found.linkage.packages if p.package == "vllm"), None)
        if (found.linkage)
        else None
    )
    said = f"{found.files_read} files read" + (
        f"; vLLM: {len(vllm.modules)} modules, {vllm.symbols} torch symbols" if vllm else ""
    )
    print(f"{seconds:7.2f} s  GPU layer: {said}", file=sys.stderr)
    return {"command": ["gpu layer"], "seconds": round(seconds, 2), "exit": 0, "found": said}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="the model's folder")
    parser.add_argument("--name", default="qwen3.5-4b")
    parser.add_argument("--model-type", default="qwen3_5")
    parser.add_argument("--vllm", help="draft for this vLLM release (new-profile --vllm)")
    parser.add_argument("--build", action="store_true", help="also build and verify the draft")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envkit-bench-") as work:
        here = Path(work) / "project"
        here.mkdir()
        model = here / "model"
        shutil.copytree(args.model, model)
        env = {
            **os.environ,
            "XDG_DATA_HOME": f"{work}/data",  # the user's profile folder: empty
            "ENVKIT_CACHE_DIR": f"{work}/cache",  # envkit's scans: cold
        }
        name = args.name
        pinned = ["--vllm", args.vllm] if args.vllm else []
        steps = [
            step(["new-profile", name, "--for-model", str(model), *pinned], here, env),
            step(["lock", name, "--torch-index", "default"], here, env),
            step(["matrix", name], here, env),
            step(["check-model", name, str(model)], here, env),
            step(["history", args.model_type], here, env),
            step(["history", args.model_type], here, env),  # warm
        ]
        if args.build:
            steps.append(step(["build", name], here, env))
            steps.append(step(["verify", name], here, env))
            steps.append(kernels(here / ".venv"))
        report = {"machine": describe(), "model": args.model.name, "steps": steps}
        print(json.dumps(report, indent=2))
    return 0 if all(s["exit"] == 0 for s in steps) else 1


if __name__ == "__main__":
    sys.exit(main())
