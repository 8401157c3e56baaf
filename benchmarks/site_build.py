"""`envkit site` cold (an empty cache: every vLLM release's wheel and sdist read) and warm,
as a user runs it, with the matrix page's weight; optionally a screenshot of the result in
a headless Chromium (for docs/commands/site.md). Run by hand (needs the package index):

    python benchmarks/site_build.py [--screenshot docs/site.png]
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

from machine import describe  # benchmarks/machine.py, beside this script


def run(out: Path, cache: str) -> tuple[float, dict]:
    env = {**os.environ, "ENVKIT_CACHE_DIR": cache}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "envkit", "site", "--out", str(out), "--json"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(done.stderr or done.stdout)
    return time.perf_counter() - start, json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--screenshot", type=Path, help="write a PNG of the matrix here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="envkit-bench-") as work:
        cache, out, again = f"{work}/cache", Path(work) / "site", Path(work) / "again"
        cold, data = run(out, cache)
        warm, _ = run(again, cache)
        same = all((out / f).read_bytes() == (again / f).read_bytes() for f in data["files"])
        print(f"machine: {describe()}")
        print(
            f"site:   {data['architectures']} architectures x {data['releases']} releases, "
            f"{len(data['files'])} files, matrix page {data['matrix_bytes']:,} bytes"
        )
        print(f"cold:   {cold:.1f} s (every release's wheel and sdist read)")
        print(f"warm:   {warm:.1f} s; byte-for-byte the same: {same}")
        chromium = shutil.which("chromium") or shutil.which("chromium-browser")
        if args.screenshot and chromium:
            subprocess.run(
                [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                 f"--screenshot={args.screenshot.resolve()}", "--window-size=1400,900",
                 (out / "index.html").as_uri() + "?q=qwen"],
                capture_output=True, check=True, timeout=120,
            )  # fmt: skip
            print(f"screenshot: {args.screenshot}")
    return 0 if same and data["matrix_bytes"] < 2_000_000 else 1


if __name__ == "__main__":
    raise SystemExit(main())
