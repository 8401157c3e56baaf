"""``envkit verify`` against a bare import of what it imports (issue 28, item 4: verify at
most 1.05x ``import vllm, transformers, torch`` in the same venv): CPU seconds (user +
system of the children, ``RUSAGE_CHILDREN`` deltas: the number a shared machine blurs
least) and wall seconds, best of N new processes of each, alternating, beside the machine
(``machine.py``) and the ratio. A second baseline is the bare import followed by what
the profile's checks make the probe do beyond it (its ``[verify] probes``, each an attribute
whose module is imported: the config and processor modules vLLM's Qwen2-VL code imports, a
few ms; transformers' Qwen2-VL modeling class, which the profile once probed and vLLM never
imports, cost about 1 s; ``torch.cuda.is_available()``): the ratio against it is envkit's
own cost.

The venv is a real one whose pins match the profile, e.g. (5-9 GB)::

    uv venv /tmp/vv --python python3.11
    uv pip install --python /tmp/vv/bin/python vllm==0.8.5 transformers==4.51.3

    python benchmarks/verify_ratio.py --venv /tmp/vv [--profile vllm-0.8.5+qwen2-vl]
        [--runs 3] [--gpu rtx-4090] [--json benchmarks/results/verify_ratio.json]

envkit's cache is the script's own, warmed by one untimed verify (compat's answer for the
pair is cached, and what the GPU layer read of the venv's files, as anywhere verify has run
before); each timed verify is a new process. "verify, first look" is timed with the GPU
layer's kept answers removed first, as the first verify of a venv reads every ELF file.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe

ROOT = Path(__file__).resolve().parent.parent
BARE = "import vllm, transformers, torch"
# resolve(dotted): the attribute a probe names, as verify's probe child finds it
RESOLVE = """
import importlib
def resolve(dotted):
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
            break
        except ImportError:
            continue
    for attr in parts[cut:]:
        found = getattr(found, attr)
    return found
"""
PROBED = (
    RESOLVE
    + """
import sys, vllm, transformers, torch
for dotted in sys.argv[1:]:
    resolve(dotted)
torch.cuda.is_available()
"""
)
# Each probe's own CPU in one process, after the bare import (what a probe adds to it).
EACH = (
    RESOLVE
    + """
import json, resource, sys, vllm, transformers, torch
def cpu():
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime
spent = {}
for dotted in sys.argv[1:]:
    start = cpu()
    resolve(dotted)
    spent[dotted] = round(cpu() - start, 3)
sys.stderr.write(json.dumps(spent) + "\\n")
"""
)
TARGET = 1.05


def timed(argv: list[str], env: dict[str, str]) -> dict[str, float | int]:
    """One new process: its CPU (the children's user + system, a delta) and wall seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        argv, env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode not in (0, 1):  # 1: a check failed, still a whole verify
        sys.stderr.write(done.stderr.decode(errors="replace")[-2000:])
        raise SystemExit(f"{argv[0]} exited {done.returncode}")
    return {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3), "exit_code": done.returncode}


def probes(profile: str) -> list[str]:
    """The profile's ``[checks] probes``, as verify's probe is asked for them."""
    from envkit.profiles.catalog import Catalog

    return list(Catalog.from_option(None).resolve(profile).checks.probes)


def probe_cpu(python: Path, names: list[str], env: dict[str, str]) -> dict[str, float]:
    """Each probe's CPU seconds in one new process, in order, after the bare import."""
    done = subprocess.run(
        [str(python), "-c", EACH, *names], env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False,
    )  # fmt: skip
    said = done.stderr.decode(errors="replace")
    if done.returncode != 0:
        raise SystemExit(f"timing the probes failed: {said[-2000:]}")
    lines = [line for line in said.splitlines() if line.startswith("{")]  # vLLM logs too
    spent: dict[str, float] = json.loads(lines[-1]) if lines else {}
    return spent


def envkit() -> list[str]:
    """envkit as a user starts it: the console script beside this interpreter."""
    script = Path(sys.executable).with_name("envkit")
    return [str(script)] if script.exists() else [sys.executable, "-m", "envkit"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=Path("/tmp/vv"))
    parser.add_argument("--profile", default="vllm-0.8.5+qwen2-vl")
    parser.add_argument("--runs", type=int, default=3, help="new processes of each (3-5)")
    parser.add_argument("--gpu", help="verify --gpu CARD (default: none, as without a GPU)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--also-probe", action="append", default=[], metavar="ATTR",
        help="time this attribute too in the per-probe CPU (e.g. a probe a profile once had)",
    )  # fmt: skip
    opts = parser.parse_args()
    python = opts.venv / "bin" / "python"
    bare = [str(python), "-c", BARE]
    probed = [str(python), "-c", PROBED, *probes(opts.profile)]
    verify = [*envkit(), "verify", opts.profile, "--venv", str(opts.venv), "--json"]
    if opts.gpu:
        verify += ["--gpu", opts.gpu]
    machine = describe()
    work = Path(tempfile.mkdtemp(prefix="envkit-verify-bench-"))
    env = {**os.environ, "ENVKIT_CACHE_DIR": str(work / "cache"), "HF_HUB_OFFLINE": "1"}
    env.pop("ENVKIT_FAULT", None)
    # the .pyc files the untimed runs write are the venv's from then on, as in any venv used
    # twice: a shell's PYTHONDONTWRITEBYTECODE would have every run compile vLLM and torch
    # (14.2 s against 8.2 s for the bare import here)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    try:
        timed(verify, env)  # untimed: compat's answer cached, every .pyc written
        timed(probed, env)
        runs: dict[str, list[dict[str, float | int]]] = {"bare import": [], "verify": []}
        runs["+ probes"] = []
        runs["verify, first look"] = []
        for _round in range(opts.runs):  # alternating, so a burst of load falls on all
            runs["bare import"].append(timed(bare, env))
            runs["verify"].append(timed(verify, env))
            runs["+ probes"].append(timed(probed, env))
            # as the first verify of a venv: what the GPU layer kept is gone, every ELF file
            # is read (compat's answer stays cached); the next verify keeps them again
            shutil.rmtree(work / "cache" / "gpu-files", ignore_errors=True)
            runs["verify, first look"].append(timed(verify, env))
            timed(verify, env)  # untimed: what the timed verify of the next round recalls
        each = probe_cpu(python, [*probes(opts.profile), *opts.also_probe], env)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    load_end = round(os.getloadavg()[0], 2)
    rows = {
        name: {
            "cpu_s": min(r["cpu_s"] for r in found),
            "wall_s": min(r["wall_s"] for r in found),
            "runs": found,
        }
        for name, found in runs.items()
    }
    ratio_cpu = rows["verify"]["cpu_s"] / rows["bare import"]["cpu_s"]
    ratio_wall = rows["verify"]["wall_s"] / rows["bare import"]["wall_s"]
    own_cpu = rows["verify"]["cpu_s"] / rows["+ probes"]["cpu_s"]
    own_wall = rows["verify"]["wall_s"] / rows["+ probes"]["wall_s"]
    first_cpu = rows["verify, first look"]["cpu_s"] / rows["bare import"]["cpu_s"]
    print(json.dumps(machine))
    print(
        f"best of {opts.runs} new processes each (alternating); load average "
        f"{machine['load_average_1m']} at the start, {load_end} at the end"
    )
    for name, r in rows.items():
        print(f"{name:<18} {r['cpu_s']:>7.2f} s CPU {r['wall_s']:>7.2f} s wall")
    print(
        f"ratio        {ratio_cpu:>7.3f}x CPU {ratio_wall:>7.3f}x wall  (target at most "
        f"{TARGET}x: {'met' if ratio_cpu <= TARGET else 'NOT met'} by CPU, "
        f"{'met' if ratio_wall <= TARGET else 'NOT met'} by wall)"
    )
    print(f"against the bare import + the probes: {own_cpu:.3f}x CPU {own_wall:.3f}x wall")
    print(f"a first verify (every ELF file read): {first_cpu:.3f}x CPU")
    for name, spent in each.items():
        print(f"probe {name}: {spent:.3f} s CPU after the bare import")
    if opts.json:
        report = {
            "machine": machine, "load_average_1m_end": load_end, "venv": str(opts.venv),
            "profile": opts.profile, "gpu": opts.gpu or "", "bare": BARE, "results": rows,
            "ratio_cpu": round(ratio_cpu, 3), "ratio_wall": round(ratio_wall, 3),
            "ratio_probed_cpu": round(own_cpu, 3), "ratio_probed_wall": round(own_wall, 3),
            "ratio_first_look_cpu": round(first_cpu, 3),
            "probes": probes(opts.profile), "probe_cpu_s": each,
            "target": TARGET,
        }  # fmt: skip
        opts.json.parent.mkdir(parents=True, exist_ok=True)
        opts.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
