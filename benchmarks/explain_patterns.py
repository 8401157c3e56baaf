"""Every regular expression explain runs on log text, against adversarial 1 MiB lines: the
worst time per pattern. The lines are ``tests/serving/adversarial.py``'s (runs of each
pattern's own literals and classes); as in ``tests/serving/explain/test_linear_patterns.py`` each
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

from envkit.serving.explain import signatures

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "serving"))
from adversarial import exercise, hardest, log_patterns  # tests/serving/adversarial.py
from machine import describe  # benchmarks/machine.py, beside this script


def label(name: str) -> str:
    """A pattern's name for people: ``logfacts._ARGS``, ``signature xet-unauthorized (root)``."""
    if name.startswith("SIGNATURES."):
        sig = signatures.SIGNATURES[int(name.split(".")[1])]
        return f"signature {sig.code.value} ({sig.role.value})"
    return name.removeprefix("envkit.serving.")


def worst(pattern: re.Pattern[str], top: int) -> tuple[float, int]:
    """The longest time of ``pattern`` on its ``top`` hardest 1 MiB lines, and how many line
    shapes were swept at 16 KiB to find them."""
    shapes, long = hardest(pattern, top)
    most = 0.0
    for line in long:
        start = time.perf_counter()
        exercise(pattern, line)
        most = max(most, time.perf_counter() - start)
    return most, shapes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--top", type=int, default=5)
    args = parser.parse_args()
    print(f"machine: {describe()}")
    results = []
    for name, pattern in log_patterns().items():
        name = label(name)
        seconds, count = worst(pattern, args.top)
        results.append((seconds, name, count))
        print(f"{seconds * 1000:8.1f} ms  {name} ({count} lines at 16 KiB)", flush=True)
    results.sort(reverse=True)
    print(
        f"patterns: {len(results)}; worst at 1 MiB: {results[0][0] * 1000:.1f} ms ({results[0][1]})"
    )


if __name__ == "__main__":
    main()
