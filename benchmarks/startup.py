"""Start-up time of the ``envkit`` command: the median wall clock of N new processes per
command, beside the machine it ran on (``machine.py``) and the targets (docs/benchmarks.md).

Each run is the real ``envkit`` console script beside this Python (else ``python -m
envkit``), from the checkout, with an envkit cache of its own (warmed by one untimed run per
command: the shipped profiles are read once, as on any machine that has run envkit before)
and the Hub offline. Bytecode, as ``--bytecode`` says:

- ``source`` (the default, the condition of the targets): envkit and every package it
  imports compiled from source in each run, the standard library from its bytecode as
  installed. A pycache prefix of the script's own holds the standard library's bytecode
  only (made by the untimed runs, every other file's bytecode deleted), and the timed runs
  write nothing (``PYTHONDONTWRITEBYTECODE``), whatever ``__pycache__`` folders the
  checkout or the venv hold.
- ``cached``: everything from bytecode (an installed envkit, whose installer compiled it).
- ``none``: nothing cached, the standard library compiled too (a fresh prefix each run).

    python benchmarks/startup.py [--runs 9] [--bytecode source|cached|none] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "fixtures" / "models" / "Qwen2-VL-2B-Instruct"
PROFILE = "vllm-0.8.5+qwen2-vl"
# a small boot log we wrote: vLLM's start, then a failure to allocate its memory
SMALL_LOG = """\
INFO 05-12 10:00:01 [api_server.py:1043] vLLM API server version 0.8.5
INFO 05-12 10:00:02 [config.py:600] This model supports multiple tasks: {'generate'}.
INFO 05-12 10:00:09 [model_runner.py:1110] Loading model weights took 4.15 GiB
ERROR 05-12 10:00:11 [core.py:700] ValueError: Free memory on device (6.98/8.0 GiB) on \
startup is less than desired GPU memory utilization (0.9, 7.2 GiB). Decrease GPU memory \
utilization or reduce GPU memory used by other processes.
"""
# command -> (arguments, target in seconds of median wall clock; None: no target)
COMMANDS: dict[str, tuple[list[str], float | None]] = {
    "--version": (["--version"], 0.15),
    "check-model": (["check-model", PROFILE, str(MODEL)], 0.3),
    "plan": (["plan", PROFILE, str(MODEL), "--gpu-memory", "24GiB"], 0.3),
    "explain": (["explain", "{log}"], 0.3),
    "--help": (["--help"], None),
}


def envkit_argv() -> list[str]:
    script = Path(sys.executable).with_name("envkit")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "envkit"]


def keep_only_stdlib(prefix: Path) -> int:
    """Delete from the pycache prefix the bytecode of every file outside the standard
    library; returns how many were kept."""
    stdlib = {Path(sysconfig.get_paths()[k]).resolve() for k in ("stdlib", "platstdlib")}
    kept = 0
    for pyc in prefix.rglob("*.pyc"):
        source_dir = Path("/") / pyc.parent.relative_to(prefix)
        if any(source_dir == s or s in source_dir.parents for s in stdlib):
            kept += 1
        else:
            pyc.unlink()
    return kept


def bench_env(work: Path, cache: str) -> tuple[Path, Path, dict[str, str]]:
    """The small log, the bytecode folder and the environment every start-up run gets: an
    envkit cache of its own (``work/cache``), the Hub offline, bytecode written (and compiled
    afresh: the folder starts empty), no fault injection."""
    log = work / "boot.log"
    log.write_text(SMALL_LOG)
    prefix = work / "pycache"
    env = {
        **os.environ,
        "ENVKIT_CACHE_DIR": str(work / cache),
        "HF_HUB_OFFLINE": "1",
        "PYTHONPYCACHEPREFIX": str(prefix),
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("ENVKIT_FAULT", None)
    return log, prefix, env


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Wall clock and CPU (user + system) seconds of one new process, and its exit code."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9, help="new processes per command")
    parser.add_argument("--bytecode", choices=("source", "cached", "none"), default="source")
    parser.add_argument("--only", action="append", choices=list(COMMANDS), help="these alone")
    parser.add_argument("--json", type=Path, help="also write the results here")
    opts = parser.parse_args()
    chosen = {k: v for k, v in COMMANDS.items() if not opts.only or k in opts.only}

    machine = describe()
    work = Path(tempfile.mkdtemp(prefix="envkit-startup-bench-"))
    try:
        log, prefix, env = bench_env(work, "cache")
        runs = {
            name: [a.replace("{log}", str(log)) for a in args]
            for name, (args, _target) in chosen.items()
        }
        codes: dict[str, int] = {}
        for name, args in runs.items():  # untimed: the cache and the prefix warmed
            codes[name] = timed([*envkit_argv(), *args], env)[2]
        kept = keep_only_stdlib(prefix) if opts.bytecode == "source" else -1
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        walls: dict[str, list[float]] = {name: [] for name in runs}
        cpus: dict[str, list[float]] = {name: [] for name in runs}
        for _round in range(opts.runs):  # round-robin, so a burst of load spreads over all
            for name, args in runs.items():
                if opts.bytecode == "none":
                    shutil.rmtree(prefix, ignore_errors=True)
                wall, cpu, code = timed([*envkit_argv(), *args], env)
                if code != codes[name]:
                    said = f"{name}: exit {code}, the untimed run gave {codes[name]}"
                    print(said, file=sys.stderr)
                    return 1
                walls[name].append(wall)
                cpus[name].append(cpu)
        load_end = round(os.getloadavg()[0], 2)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    results = {
        name: {
            "argv": runs[name],
            "exit_code": codes[name],
            "median_wall_s": round(statistics.median(walls[name]), 3),
            "min_wall_s": round(min(walls[name]), 3),
            "median_cpu_s": round(statistics.median(cpus[name]), 3),
            "target_s": target,
            "met": None if target is None else statistics.median(walls[name]) <= target,
        }
        for name, (_args, target) in chosen.items()
    }
    report = {
        "machine": machine,
        "load_average_1m_end": load_end,
        "bytecode": opts.bytecode,
        "stdlib_bytecode_files_kept": kept if kept >= 0 else None,
        "runs": opts.runs,
        "results": results,
    }
    print(json.dumps(machine))
    print(
        f"bytecode: {opts.bytecode}; {opts.runs} new processes per command; "
        f"load average {machine['load_average_1m']} at the start, {load_end} at the end"
    )
    print(f"{'command':<12} {'median wall':>11} {'min wall':>9} {'median CPU':>10}  target")
    for name, r in results.items():
        target = (
            ""
            if r["target_s"] is None
            else f"{r['target_s']:.2f} s " + ("met" if r["met"] else "NOT met")
        )
        print(
            f"{name:<12} {r['median_wall_s']:>9.3f} s {r['min_wall_s']:>7.3f} s "
            f"{r['median_cpu_s']:>8.3f} s  {target}"
        )
    if opts.json:
        opts.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
