"""A 12-cell lock matrix of a real profile on a warm uv cache: parallel against sequential.

The profile is vllm-0.8.5+qwen2-vl with its matrix widened to 4 Pythons x 3 platforms
(12 cells), locked into a temporary folder. One warm-up run fills uv's cache. Then, in
alternating order, each way is timed in both of envkit's modes:

- revalidate (`--refresh`, also what `--check --resolve` and profiles without
  exclude_newer do): uv's warm cache as uv uses it, every index page revalidated;
- cache-first (the default with exclude_newer): uv's cache alone, no network at all;

and three ways: parallel (--jobs N), sequential in one invocation (--jobs 1), and one cell
after another as a shell loop would (one `envkit lock --cell` each, cache-first only). The
exit code judges parallel against --jobs 1 with revalidation (uv's warm cache); the
cache-first ratio is printed beside it. Run by hand (needs the index):

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

from machine import describe  # benchmarks/machine.py, beside this script

ROOT = Path(__file__).resolve().parent.parent
PROFILE = "vllm-0.8.5+qwen2-vl"


def envkit(folder: Path, *args: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "envkit",
            "--envs",
            str(folder / "envs"),
            "lock",
            PROFILE,
            "--torch-index",
            "default",
            "--constraints",
            str(folder / "constraints"),
            *args,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # 1: some cells refused (from the default index, torch 2.6.0 for aarch64 and macOS is
    # not the CUDA 12.4 build); they were resolved all the same, which is what is timed
    if done.returncode not in (0, 1):
        raise SystemExit(f"envkit lock failed with exit {done.returncode}")


def run(folder: Path, jobs: int, *extra: str) -> float:
    start = time.perf_counter()
    envkit(folder, "--jobs", str(jobs), *extra)
    return time.perf_counter() - start


def run_each(folder: Path, cells: list[str]) -> float:
    """One cell after another, one invocation each: a shell loop over the cells."""
    start = time.perf_counter()
    for cell in cells:
        envkit(folder, "--cell", cell, "--jobs", "1")
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
        text = re.sub(
            r"^python = \[.*\]$", 'python = ["3.9", "3.10", "3.11", "3.12"]', text, flags=re.M
        )
        text = re.sub(
            r"^platforms = \[.*\]$",
            'platforms = ["linux-x86_64", "linux-aarch64", "macos-arm64"]',
            text,
            flags=re.M,
        )
        (folder / "envs" / f"{PROFILE}.toml").write_text(text)
        print("warm-up ...", file=sys.stderr)
        run(folder, args.jobs)
        names = [
            f"py{python}-{platform}-cu124"
            for python in ("3.9", "3.10", "3.11", "3.12")
            for platform in ("linux-x86_64", "linux-aarch64", "macos-arm64")
        ]
        ways = {
            "sequential": lambda: run(folder, 1),
            "parallel": lambda: run(folder, args.jobs),
            "each": lambda: run_each(folder, names),
            "revalidate_sequential": lambda: run(folder, 1, "--refresh"),
            "revalidate_parallel": lambda: run(folder, args.jobs, "--refresh"),
        }
        times: dict[str, list[float]] = {name: [] for name in ways}
        for round_ in range(args.rounds):
            order = list(ways) if round_ % 2 == 0 else list(reversed(ways))
            for name in order:
                seconds = ways[name]()
                times[name].append(seconds)
                print(f"round {round_ + 1}: {name:22} {seconds:6.2f} s", file=sys.stderr)
        med = {name: statistics.median(values) for name, values in times.items()}
        seq, par = med["revalidate_sequential"], med["revalidate_parallel"]
        report = {
            "machine": describe(),
            "cells": len(names),
            "jobs": args.jobs,
            "revalidate": {
                "sequential_jobs1_s": round(seq, 2),
                "parallel_s": round(par, 2),
                "ratio_vs_jobs1": round(par / seq, 3),
            },
            "cache_first": {
                "sequential_jobs1_s": round(med["sequential"], 2),
                "parallel_s": round(med["parallel"], 2),
                "one_invocation_per_cell_s": round(med["each"], 2),
                "ratio_vs_jobs1": round(med["parallel"] / med["sequential"], 3),
                "ratio_vs_one_invocation_per_cell": round(med["parallel"] / med["each"], 3),
            },
            "target_ratio": 0.5,
            "all": {k: [round(v, 2) for v in vals] for k, vals in times.items()},
        }
        print(json.dumps(report, indent=2))
        return 0 if par <= 0.5 * seq else 1
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
