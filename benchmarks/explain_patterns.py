"""Every regular expression explain runs on log text, against adversarial 1 MiB lines: the
worst time per pattern. The lines are ``tests/serving/adversarial.py``'s (runs of each
pattern's own literals and classes); as in ``tests/serving/test_linear_patterns.py`` each
pattern's five slowest lines at 16 KiB are run again at 1 MiB (searched and full-matched).
Run by hand:

    python benchmarks/explain_patterns.py [--top 5]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

from envkit.serving import logfacts, logread, signatures

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "serving"))
from adversarial import lines  # tests/serving/adversarial.py
from machine import describe  # benchmarks/machine.py, beside this script


def patterns() -> dict[str, re.Pattern[str]]:
    found = {
        f"{m.__name__.rsplit('.', 1)[-1]}.{k}": v
        for m in (signatures, logfacts, logread)
        for k, v in vars(m).items()
        if isinstance(v, re.Pattern)
    }
    for sig in signatures.SIGNATURES:
        found[f"signature {sig.code.value} ({sig.role.value})"] = sig.pattern
    return found


def worst(pattern: re.Pattern[str], top: int) -> tuple[float, int]:
    timed = []
    for i, line in enumerate(lines(pattern, 16 << 10)):
        start = time.perf_counter()
        pattern.search(line)
        pattern.fullmatch(line)
        timed.append((time.perf_counter() - start, i))
    slowest = {i for _, i in sorted(timed, reverse=True)[:top]}
    most = 0.0
    for i, line in enumerate(lines(pattern, 1 << 20)):
        if i in slowest:
            start = time.perf_counter()
            pattern.search(line)
            pattern.fullmatch(line)
            most = max(most, time.perf_counter() - start)
    return most, len(timed)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--top", type=int, default=5)
    args = parser.parse_args()
    print(f"machine: {describe()}")
    results = []
    for name, pattern in patterns().items():
        seconds, count = worst(pattern, args.top)
        results.append((seconds, name, count))
        print(f"{seconds * 1000:8.1f} ms  {name} ({count} lines at 16 KiB)", flush=True)
    results.sort(reverse=True)
    print(
        f"patterns: {len(results)}; worst at 1 MiB: {results[0][0] * 1000:.1f} ms ({results[0][1]})"
    )


if __name__ == "__main__":
    main()
