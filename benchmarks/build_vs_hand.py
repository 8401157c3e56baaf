"""envkit build against the same environment made by hand, side by side, on a warm uv cache.

By hand: ``uv venv``, ``uv pip install`` with the profile's pins (same constraints, same
exclude-newer, torch from the default index), then one import of vllm, transformers and torch.
envkit: ``envkit build PROFILE --torch-index default`` (creates aside, installs, verifies,
swaps). Rounds alternate which goes first. Run by hand (needs the package index, ~8 GB disk):

    python benchmarks/build_vs_hand.py [--profile vllm-0.8.5+qwen2-vl] [--rounds 3] [--cold]

--cold first times one envkit build on an empty uv cache (the README's set-up figure).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import describe  # benchmarks/machine.py, beside this script

from envkit.env.build import constraints_text
from envkit.env.interpreters import find_interpreter
from envkit.io.uv import find_uv
from envkit.profiles.catalog import Catalog

ROOT = Path(__file__).resolve().parent.parent


def timed(commands: list[list[str]], cwd: Path) -> float:
    start = time.perf_counter()
    for command in commands:
        subprocess.run(
            command, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default="vllm-0.8.5+qwen2-vl")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cold", action="store_true", help="time a build on an empty uv cache")
    args = parser.parse_args()
    profile = Catalog.from_option(str(ROOT / "envs")).resolve(args.profile)
    python = str(find_interpreter(profile.python).path)
    uv = find_uv()
    work = Path(tempfile.mkdtemp(prefix="envkit-bench-"))
    constraints = work / "constraints.txt"
    constraints.write_text(constraints_text(profile))
    extra = ["--exclude-newer", profile.exclude_newer] if profile.exclude_newer else []
    imports = ", ".join(profile.checks.imports) or "vllm"
    envkit_cmd = [
        [
            sys.executable,
            "-m",
            "envkit",
            "--envs",
            str(ROOT / "envs"),
            "build",
            profile.name,
            "--torch-index",
            "default",
            "--python",
            python,
        ]
    ]
    hand_cmd = [
        [uv, "venv", "--quiet", "--python", python, ".venv"],
        [
            uv,
            "pip",
            "install",
            "--quiet",
            "--python",
            ".venv/bin/python",
            "-c",
            str(constraints),
            *extra,
            *profile.requirements,
        ],
        [".venv/bin/python", "-c", f"import {imports}"],
    ]
    cold_s = None
    try:
        if args.cold:
            (work / "cold").mkdir()
            os.environ["UV_CACHE_DIR"] = str(work / "uv-cache")  # empty: every wheel fetched
            cold_s = timed(envkit_cmd, work / "cold")
            shutil.rmtree(work / "cold")
            print(f"cold:    envkit {cold_s:6.2f} s", file=sys.stderr)
        print("warm-up (fills the uv cache) ...", file=sys.stderr)
        (work / "warm").mkdir()
        timed(hand_cmd, work / "warm")
        shutil.rmtree(work / "warm")
        results: dict[str, list[float]] = {"envkit": [], "hand": []}
        for round_ in range(args.rounds):
            order = ["envkit", "hand"] if round_ % 2 == 0 else ["hand", "envkit"]
            for name in order:
                folder = work / f"{name}-{round_}"
                folder.mkdir()
                seconds = timed(envkit_cmd if name == "envkit" else hand_cmd, folder)
                results[name].append(seconds)
                shutil.rmtree(folder)
                print(f"round {round_ + 1}: {name:6} {seconds:6.2f} s", file=sys.stderr)
        envkit_s = statistics.median(results["envkit"])
        hand_s = statistics.median(results["hand"])
        report = {
            "machine": describe(),
            "profile": profile.name,
            "rounds": args.rounds,
            "envkit_median_s": round(envkit_s, 2),
            "hand_median_s": round(hand_s, 2),
            "ratio": round(envkit_s / hand_s, 3),
            "cold_envkit_s": round(cold_s, 2) if cold_s is not None else None,
            "target_ratio": 1.25,
            "all": {k: [round(v, 2) for v in vals] for k, vals in results.items()},
        }
        print(json.dumps(report, indent=2))
        return 0 if report["ratio"] <= 1.25 else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
