"""The offline test suite as issue 28's target counts it: the README's test command without
the tests that start a real container builder or a Ray cluster (``-m 'not network and not
container and not cluster'``). It prints the wall time and the CPU time (user and system, of
pytest, its workers and every process they waited for: uv, envkit, the venvs' interpreters),
with the number of tests it ran and the machine it ran on. That suite must stay under 45 s on
two quiet cores; on a machine other sessions share, the wall clock says little and the CPU
total, about twice the quiet wall time on two cores, says what the suite costs. Run by hand
from the repository's root:

    python benchmarks/suite_time.py [--runs 1] [--network | --heavy | --whole] [--per-test 20]

``--heavy`` runs the offline tests marked ``container`` or ``cluster`` instead (a real container
builder, a local Ray cluster: at most 3 minutes together, skipped without their tools);
``--whole`` runs the README's test command as it is (both of those together);
``--per-test N`` also prints the N tests that took the most CPU (recorded by the tests'
conftest under ``ENVKIT_TEST_CPU``), with what each file took in all.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from machine import describe  # benchmarks/machine.py, beside this script

ROOT = Path(__file__).resolve().parent.parent


def _children_cpu() -> tuple[float, float]:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime, used.ru_stime


def _per_test(folder: Path, top: int) -> dict[str, Any]:
    rows = [
        json.loads(line)
        for path in sorted(folder.glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    cost = {r["test"]: r["cpu"] + r["children"] for r in rows}
    files: dict[str, float] = defaultdict(float)
    for test, seconds in cost.items():
        files[test.split("::")[0]] += seconds
    slowest = sorted(cost.items(), key=lambda kv: -kv[1])[:top]
    return {
        "recorded_cpu_s": round(sum(cost.values()), 1),
        "tests": [{"test": t, "cpu_s": round(s, 2)} for t, s in slowest],
        "files": [
            {"file": f, "cpu_s": round(s, 2)}
            for f, s in sorted(files.items(), key=lambda kv: -kv[1])[:top]
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--network", action="store_true", help="the network tests instead")
    which.add_argument("--heavy", action="store_true", help="the container and cluster tests")
    which.add_argument("--whole", action="store_true", help="the README's command as it is")
    parser.add_argument("--per-test", type=int, default=0, metavar="N")
    args = parser.parse_args()
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    if args.network:
        command += ["-m", "network"]
    elif args.heavy:
        command += ["-m", "(container or cluster) and not network"]
    elif not args.whole:
        command += ["-m", "not network and not container and not cluster"]
    runs = []
    machine = describe()
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="suite-cpu-") as record:
            env = {**os.environ, "ENVKIT_TEST_CPU": record} if args.per_test else None
            user, system = _children_cpu()
            start = time.perf_counter()
            done = subprocess.run(
                command, cwd=ROOT, capture_output=True, text=True, check=False, env=env
            )
            seconds = time.perf_counter() - start
            user_after, system_after = _children_cpu()
            summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
            counts = {
                k: int(n) for n, k in re.findall(r"([0-9]+) (passed|failed|skipped|error)", summary)
            }
            run: dict[str, Any] = {
                "seconds": round(seconds, 1),
                "cpu_user_s": round(user_after - user, 1),
                "cpu_system_s": round(system_after - system, 1),
                "exit": done.returncode,
                **counts,
            }
            if args.per_test:
                run["per_test"] = _per_test(Path(record), args.per_test)
        runs.append(run)
        cpu = run["cpu_user_s"] + run["cpu_system_s"]
        print(f"{seconds:6.1f} s wall, {cpu:6.1f} s CPU  {summary}", file=sys.stderr)
    print(json.dumps({"machine": machine, "command": command[1:], "runs": runs}, indent=2))
    return 0 if all(r["exit"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
