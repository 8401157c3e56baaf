"""The GPU layer's one look at an installed environment (`envkit.gpu.installed.assess.assess`, what
verify, build and doctor run): its CPU and wall time and the files it reads, each run in a new
process so that nothing is cached in memory (the page cache stays warm after the first).
Cold: each run with an empty envkit cache of its own, so every ELF file is read; warm: runs
sharing one cache after a first look, so what was kept for unchanged files is used
(`envkit.gpu.installed.remembered`).

    python benchmarks/gpu_assess.py SITE_PACKAGES [--runs 5] [--compute-capability 12.0]

SITE_PACKAGES is a real environment's, e.g. one `envkit build vllm-0.8.5+qwen2-vl` made.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

CHILD = """
import json, sys, time
from pathlib import Path
from typing import Any
from envkit.gpu.arch import Capability
from envkit.gpu.installed.assess import GpuTarget, assess
cpu, wall = time.process_time(), time.monotonic()
report = assess(Path(sys.argv[1]), GpuTarget(Capability.parse(sys.argv[2])))
print(json.dumps({"cpu": time.process_time() - cpu, "wall": time.monotonic() - wall,
                  "files": report.files_read, "remembered": report.files_remembered,
                  "modules": len(report.modules),
                  "findings": sorted({f.code for f in report.findings})}))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site_packages")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--compute-capability", default="12.0")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="envkit-gpu-assess-"))

    def look(cache: Path) -> dict[str, Any]:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, args.site_packages, args.compute_capability],
            capture_output=True, text=True, check=True,
            env={**os.environ, "ENVKIT_CACHE_DIR": str(cache)},
        )  # fmt: skip
        found: dict[str, Any] = json.loads(out.stdout)
        return found

    try:
        rows: dict[str, list[dict[str, Any]]] = {"cold": [], "warm": []}
        look(work / "warm")  # the first look keeps what the warm runs use
        for index in range(args.runs):
            rows["cold"].append(look(work / f"cold-{index}"))
            rows["warm"].append(look(work / "warm"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for name, runs in rows.items():
        cpu = statistics.median(r["cpu"] for r in runs)
        wall = statistics.median(r["wall"] for r in runs)
        last = runs[-1]
        print(
            f"{name}: {args.runs} runs, median {cpu:.3f} s CPU, {wall:.3f} s wall; "
            f"{last['files']} files read, {last['remembered']} answers kept from before, "
            f"{last['modules']} compiled modules; findings {', '.join(last['findings'])}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
