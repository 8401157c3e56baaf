"""`envkit compat vllm==X transformers==Y`: cold (nothing cached) and cached, as a user runs
it (a new process each time), with the bytes read against the two wheels' size.

Targets (issue 10): cold under 3 s and under 2% of the two wheels' bytes; cached under 0.3 s.
Run by hand (needs the package index):

    python benchmarks/compat_pair.py [--vllm 0.8.5] [--transformers 5.0.0] [--runs 3]
                                     [--removed-in]

--removed-in times `compat --removed-in` (the bisection of the releases in between) as well.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from machine import describe  # benchmarks/machine.py, beside this script


def run(args: list[str], cache: str) -> tuple[float, dict]:
    env = {**os.environ, "ENVKIT_CACHE_DIR": cache}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "envkit", "compat", *args, "--json"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(done.stderr or done.stdout)
    return seconds, json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vllm", default="0.8.5")
    parser.add_argument("--transformers", default="5.0.0")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--removed-in", action="store_true", help="also time --removed-in")
    args = parser.parse_args()
    pair = [f"vllm=={args.vllm}", f"transformers=={args.transformers}"]
    if args.removed_in:
        with tempfile.TemporaryDirectory(prefix="envkit-bench-") as cache:
            plain = run(pair, cache)[0]
        with tempfile.TemporaryDirectory(prefix="envkit-bench-") as cache:
            dated = run([*pair, "--removed-in"], cache)[0]
        print(f"removed-in: {dated:.2f} s cold, {dated - plain:.2f} s beyond compat's {plain:.2f}")
    cold, warm, share = [], [], []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="envkit-bench-") as cache:
            seconds, data = run(pair, cache)
            cold.append(seconds)
            cost = data["cost"]
            share.append(cost["bytes_read"] / cost["wheel_bytes"])
            warm.append(run(pair, cache)[0])
    print(f"machine: {describe()}")
    print(
        f"pair:    vLLM {args.vllm} + transformers {args.transformers}: "
        f"{len(data['findings'])} findings, ok={data['ok']}"
    )
    print(
        f"cold:    median {statistics.median(cold):.2f} s (runs: "
        + ", ".join(f"{s:.2f}" for s in cold)
        + "), target < 3 s"
    )
    print(
        f"bytes:   {cost['bytes_read']:,} of {cost['wheel_bytes']:,} "
        f"({100 * statistics.median(share):.2f}%), {cost['requests']} requests, target < 2%"
    )
    print(
        f"cached:  median {statistics.median(warm):.2f} s (runs: "
        + ", ".join(f"{s:.2f}" for s in warm)
        + "), target < 0.3 s"
    )
    ok = statistics.median(cold) < 3 and statistics.median(share) < 0.02
    return 0 if ok and statistics.median(warm) < 0.3 else 1


if __name__ == "__main__":
    raise SystemExit(main())
