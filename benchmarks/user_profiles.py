"""``envkit which`` and ``check-model`` in a user's project of four profiles (copies of the
shipped ones, each a text envkit has not met), new processes, best of N by CPU (user +
system of the child): with envkit's cache emptied before each run (the first run after the
profiles are edited), with it warm, and warm with a fifth profile that is broken (never
kept, so read afresh by every command). envkit is compiled from source in every run
(``PYTHONDONTWRITEBYTECODE=1``, as this machine's sessions run). ``--src DIR`` times
another tree of envkit's ``src`` (put first on PYTHONPATH) in alternation with this one:
before and after in the same minutes.

    python benchmarks/user_profiles.py [--runs 7] [--src /tmp/old/src]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "tests" / "fixtures" / "models" / "Qwen2-VL-2B-Instruct"
BROKEN = 'exclude_newer = "soon"\n'  # TOML, but not a profile
# in one process: the runs-on verdicts of the shipped profiles (which without a GPU), the
# first pass and then the mean of 20, in ms of CPU
IN_PROCESS = """
import time
from pathlib import Path
from envkit.gpu.published import profilefit
from envkit.profiles.profile import load_profile
profiles = [load_profile(p) for p in sorted(Path("envs").glob("*.toml"))]
def once():
    check = profilefit.checker(None)
    for p in profiles:
        check(p)
t0 = time.process_time(); once(); t1 = time.process_time()
for _ in range(20):
    once()
t2 = time.process_time()
print(f"{1000 * (t1 - t0):.2f} ms first, {1000 * (t2 - t1) / 20:.2f} ms a pass after")
"""


def child_cpu(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def project(where: Path, broken: bool) -> Path:
    envs = where / "envs"
    envs.mkdir(parents=True)
    for shipped in sorted((ROOT / "envs").glob("*.toml")):
        (envs / shipped.name).write_text("# a user's copy\n" + shipped.read_text())
    if broken:
        (envs / "broken.toml").write_text((ROOT / "envs" / "vllm-0.9.2.toml").read_text() + BROKEN)
    return where


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--src", type=Path, help="another tree's src, timed beside this one")
    opts = parser.parse_args()
    trees = {"this": str(ROOT / "src")}
    if opts.src:
        trees = {"other": str(opts.src.resolve()), **trees}
    commands = {
        "which": ["which", str(MODEL)],
        "check-model": ["check-model", "vllm-0.8.5+qwen2-vl", str(MODEL)],
    }
    print(describe())
    print(
        f"best of {opts.runs} new processes by CPU (user + system), load {os.getloadavg()[0]:.2f}"
    )
    work = Path(tempfile.mkdtemp(prefix="envkit-user-profiles-"))
    try:
        for condition in ("emptied cache", "warm cache", "warm, one broken"):
            folder = project(
                work / condition.replace(" ", "-").replace(",", ""), "broken" in condition
            )
            for name, args in commands.items():
                best = {tree: float("inf") for tree in trees}
                for _round in range(opts.runs + 1):  # the first round warms, untimed
                    for tree, src in trees.items():
                        cache = folder / f"cache-{tree}"
                        env = dict(os.environ, PYTHONPATH=src, PYTHONDONTWRITEBYTECODE="1",
                                   ENVKIT_CACHE_DIR=str(cache),
                                   XDG_DATA_HOME=str(folder / "data"))  # fmt: skip
                        if condition == "emptied cache":
                            shutil.rmtree(cache, ignore_errors=True)
                        cpu = child_cpu([sys.executable, "-m", "envkit", *args], folder, env)
                        if _round:
                            best[tree] = min(best[tree], cpu)
                said = ", ".join(f"{tree} {cpu:.3f} s" for tree, cpu in best.items())
                print(f"{condition:18} {name:12} {said}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for tree, src in trees.items():
        env = dict(os.environ, PYTHONPATH=src)
        argv = [sys.executable, "-c", IN_PROCESS]
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
        said = done.stdout.strip()
        print(f"runs-on of the shipped profiles in one process, {tree}: {said}")
    print(f"load {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
