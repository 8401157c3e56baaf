"""The GPU layer's one look at an installed environment (`envkit.gpu.installed.assess.assess`, what
verify, build and doctor run): its CPU and wall time and the files it reads, each run in a new
process so that nothing is cached in memory (the page cache stays warm after the first).

    python benchmarks/gpu_assess.py SITE_PACKAGES [--runs 5] [--compute-capability 12.0]

SITE_PACKAGES is a real environment's, e.g. one `envkit build vllm-0.8.5+qwen2-vl` made.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = """
import json, sys, time
from pathlib import Path
from envkit.gpu.arch import Capability
from envkit.gpu.installed.assess import GpuTarget, assess
cpu, wall = time.process_time(), time.monotonic()
report = assess(Path(sys.argv[1]), GpuTarget(Capability.parse(sys.argv[2])))
print(json.dumps({"cpu": time.process_time() - cpu, "wall": time.monotonic() - wall,
                  "files": report.files_read, "modules": len(report.modules),
                  "findings": sorted({f.code for f in report.findings})}))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site_packages")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--compute-capability", default="12.0")
    args = parser.parse_args(argv)
    runs = []
    for _ in range(args.runs):
        out = subprocess.run(
            [sys.executable, "-c", CHILD, args.site_packages, args.compute_capability],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        runs.append(json.loads(out.stdout))
    cpu = statistics.median(r["cpu"] for r in runs)
    wall = statistics.median(r["wall"] for r in runs)
    last = runs[-1]
    print(
        f"{args.runs} runs: median {cpu:.2f} s CPU, {wall:.2f} s wall; {last['files']} files "
        f"read, {last['modules']} compiled modules; findings {', '.join(last['findings'])}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
