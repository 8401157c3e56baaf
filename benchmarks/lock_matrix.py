"""A 12-cell lock matrix of a real profile on a warm uv cache: parallel against sequential.

The profile is vllm-0.8.5+qwen2-vl with its matrix widened to 4 Pythons x 3 platforms
(12 cells), locked into a temporary folder. One warm-up run fills uv's cache; then the
sequential (--jobs 1) and parallel (--jobs N) runs alternate. Run by hand (needs the index):

    python benchmarks/lock_matrix.py [--jobs 4] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROFILE = "vllm-0.8.5+qwen2-vl"


def run(folder: Path, jobs: int) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "envkit", "--envs", str(folder / "envs"), "lock", PROFILE,
         "--jobs", str(jobs), "--torch-index", "default", "--constraints",
         str(folder / "constraints")],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="envkit-lockbench-"))
    try:
        (folder / "envs").mkdir()
        text = (ROOT / "envs" / f"{PROFILE}.toml").read_text()
        text = re.sub(r'^python = ".*"', 'python = ">=3.9,<3.13"', text, flags=re.M)
        text = re.sub(r"^python = \[.*\]$", 'python = ["3.9", "3.10", "3.11", "3.12"]', text,
                      flags=re.M)
        text = re.sub(r"^platforms = \[.*\]$",
                      'platforms = ["linux-x86_64", "linux-aarch64", "macos-arm64"]', text,
                      flags=re.M)
        (folder / "envs" / f"{PROFILE}.toml").write_text(text)
        print("warm-up ...", file=sys.stderr)
        run(folder, args.jobs)
        times: dict[str, list[float]] = {"sequential": [], "parallel": []}
        for round_ in range(args.rounds):
            order = ["sequential", "parallel"] if round_ % 2 == 0 else ["parallel", "sequential"]
            for name in order:
                seconds = run(folder, 1 if name == "sequential" else args.jobs)
                times[name].append(seconds)
                print(f"round {round_ + 1}: {name:10} {seconds:6.2f} s", file=sys.stderr)
        seq, par = statistics.median(times["sequential"]), statistics.median(times["parallel"])
        cells = len(list((folder / "constraints" / PROFILE).glob("*.txt")))
        report = {"cells": cells, "jobs": args.jobs, "sequential_s": round(seq, 2),
                  "parallel_s": round(par, 2), "ratio": round(par / seq, 3), "target_ratio": 0.5,
                  "all": {k: [round(v, 2) for v in vals] for k, vals in times.items()}}
        print(json.dumps(report, indent=2))
        return 0 if par <= 0.5 * seq else 1
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
