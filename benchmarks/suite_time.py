"""The offline test suite's wall time as the README's test command runs it, with the number
of tests it ran and the machine it ran on (the default suite must stay under 45 s on two
quiet cores). Run by hand from the repository's root:

    python benchmarks/suite_time.py [--runs 1] [--network]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from machine import describe  # benchmarks/machine.py, beside this script

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--network", action="store_true", help="the network tests instead")
    args = parser.parse_args()
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    if args.network:
        command += ["-m", "network"]
    runs = []
    machine = describe()
    for _ in range(args.runs):
        start = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - start
        summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
        counts = {k: int(n) for n, k in re.findall(r"([0-9]+) (passed|failed|skipped)", summary)}
        runs.append({"seconds": round(seconds, 1), "exit": done.returncode, **counts})
        print(f"{seconds:6.1f} s  {summary}", file=sys.stderr)
    print(json.dumps({"machine": machine, "command": command[1:], "runs": runs}, indent=2))
    return 0 if all(r["exit"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
