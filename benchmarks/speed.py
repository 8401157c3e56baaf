"""Speed of the commands people run most (issue 28, item 4): CPU seconds (user + system of
the child, the number a shared machine does not blur), wall seconds and peak RSS of new
processes, best of N, beside the machine (``machine.py``) and the targets.

- start-up: ``--version``, ``check-model`` and ``plan`` of the shipped Qwen2-VL config,
  ``explain`` of a small synthetic log; envkit and its libraries compiled from source in
  each run, the standard library from its bytecode (``startup.py --bytecode source``'s
  condition), the shipped profiles read once beforehand (an envkit cache of the script's own);
- ``compat vllm==0.8.5 transformers==5.0.0``, compiled from source as above: cold (an
  empty ``ENVKIT_CACHE_DIR`` each run) and cached (needs the package index);
- with ``--history MODEL_TYPE``: ``history MODEL_TYPE`` cold, over every vLLM release
  (needs the index; minutes).

    python benchmarks/speed.py [--runs 3] [--skip-network | --only-compat] [--history qwen2_vl]
                               [--json benchmarks/results/speed.json]

--only-compat times the compat rows alone, in the same condition (the start-up commands run
once, untimed, to leave the same standard-library bytecode).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe
from startup import COMMANDS, bench_env, envkit_argv, keep_only_stdlib

ROOT = Path(__file__).resolve().parent.parent
PAIR = ["vllm==0.8.5", "transformers==5.0.0"]
# name -> (CPU seconds, peak MiB or None); the targets, set for wall seconds on a
# quiet 2-core machine, where a single-threaded command's wall is about its CPU
TARGETS: dict[str, tuple[float, float | None]] = {
    "--version": (0.15, None),
    "check-model": (0.3, None),
    "plan": (0.3, None),
    "explain": (0.3, None),
    "compat cold": (2.5, 100.0),
    "compat cached": (0.2, None),
    "history cold": (10.0, None),
}


def measured(argv: list[str], env: dict[str, str]) -> dict[str, float | int]:
    """One new process: wall and CPU seconds, peak RSS in MiB, exit code. The peak comes
    from ``wait4``'s own usage of that child alone."""
    start = time.perf_counter()
    child = subprocess.Popen(
        argv,
        env=env,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _pid, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    return {
        "wall_s": round(wall, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "peak_mib": round(usage.ru_maxrss / 1024, 1),
        "exit_code": child.returncode,
    }


def best(runs: list[dict[str, float | int]]) -> dict[str, float | int]:
    """The best of N by CPU seconds (with that run's wall and peak), and the N."""
    top = min(runs, key=lambda r: r["cpu_s"])
    return {**top, "min_wall_s": min(r["wall_s"] for r in runs), "runs": len(runs)}


def startup_rows(runs: int, work: Path) -> dict[str, dict[str, float | int]]:
    """The start-up rows; with ``runs`` 0, only their untimed first runs, which leave the
    standard library's bytecode in the pycache prefix the compat rows share."""
    log, prefix, env = bench_env(work, "startup-cache")
    chosen = {k: v for k, v in COMMANDS.items() if k in TARGETS}
    argvs = {
        n: [*envkit_argv(), *(a.replace("{log}", str(log)) for a in args)]
        for n, (args, _t) in chosen.items()
    }
    for argv in argvs.values():  # untimed: the profiles' cache and the stdlib's bytecode
        measured(argv, env)
    keep_only_stdlib(prefix)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    found: dict[str, list[dict[str, float | int]]] = {n: [] for n in argvs}
    for _round in range(runs):  # round-robin, so a burst of load spreads over all
        for name, argv in argvs.items():
            found[name].append(measured(argv, env))
    return {name: best(r) for name, r in found.items() if r}


def network_rows(runs: int, work: Path, history: str | None) -> dict[str, dict[str, float | int]]:
    """Compat and history in the start-up rows' condition (their pycache prefix: the
    standard library's bytecode alone), after them."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "PYTHONPYCACHEPREFIX": str(work / "pycache"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.pop("ENVKIT_FAULT", None)
    compat = [*envkit_argv(), "compat", *PAIR, "--json"]
    cold, cached = [], []
    for n in range(runs):
        env["ENVKIT_CACHE_DIR"] = str(work / f"compat-cache-{n}")
        cold.append(measured(compat, env))
        cached.append(measured(compat, env))
    rows = {"compat cold": best(cold), "compat cached": best(cached)}
    if history:
        env["ENVKIT_CACHE_DIR"] = str(work / "history-cache")
        rows["history cold"] = best([measured([*envkit_argv(), "history", history, "--json"], env)])
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="new processes per command")
    parser.add_argument("--skip-network", action="store_true", help="start-up rows only")
    parser.add_argument(
        "--only-compat", action="store_true", help="the compat rows alone (needs the index)"
    )
    parser.add_argument("--history", metavar="MODEL_TYPE", help="also time history, cold")
    parser.add_argument("--json", type=Path, help="also write the results here")
    opts = parser.parse_args()
    machine = describe()
    work = Path(tempfile.mkdtemp(prefix="envkit-speed-bench-"))
    try:
        rows = startup_rows(0 if opts.only_compat else opts.runs, work)
        if not opts.skip_network:
            rows.update(network_rows(opts.runs, work, opts.history))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load_end = round(os.getloadavg()[0], 2)
    for name, row in rows.items():
        cpu, peak = TARGETS[name]
        row["target_cpu_s"], row["target_peak_mib"] = cpu, peak
        row["met"] = row["cpu_s"] <= cpu and (peak is None or row["peak_mib"] <= peak)
    print(json.dumps(machine))
    print(
        f"best of {opts.runs} new processes by CPU (user + system); load average "
        f"{machine['load_average_1m']} at the start, {load_end} at the end"
    )
    print(f"{'command':<14} {'CPU':>8} {'wall':>8} {'min wall':>9} {'peak':>9}  target")
    for name, r in rows.items():
        peak = f", {r['target_peak_mib']:.0f} MiB" if r["target_peak_mib"] else ""
        print(
            f"{name:<14} {r['cpu_s']:>6.2f} s {r['wall_s']:>6.2f} s {r['min_wall_s']:>7.2f} s "
            f"{r['peak_mib']:>5.0f} MiB  {r['target_cpu_s']:.2f} s{peak} "
            + ("met" if r["met"] else "NOT met")
        )
    if opts.json:
        report = {"machine": machine, "load_average_1m_end": load_end, "results": rows}
        opts.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
