"""`envkit scan vllm==X --no-cache` against downloading the whole wheel and parsing it.

Both runs parse the same files with the same code; only how the bytes arrive differs. Run
by hand (needs the package index):

    python benchmarks/scan_vs_download.py [--version 0.8.5]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path

from machine import describe  # benchmarks/machine.py, beside this script
from packaging.version import Version

from envkit.index.pages import pick_wheel
from envkit.io.urls import index_url
from envkit.releases.registry import VLLM_CONFIG, VLLM_LAYOUTS, Scanner, scan_vllm


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--version", default="0.8.5")
    args = parser.parse_args()
    version = Version(args.version)

    start = time.perf_counter()
    scanner = Scanner(index_url(), use_cache=False)
    result = scanner.scan("vllm", version)
    ranged_s = time.perf_counter() - start
    ranged_bytes = scanner.http.traffic.bytes  # the index page included

    wheel = pick_wheel(scanner.files("vllm"), version)
    folder = Path(tempfile.mkdtemp(prefix="envkit-bench-"))
    try:
        start = time.perf_counter()
        target = folder / wheel.filename
        with urllib.request.urlopen(wheel.url, timeout=300) as response, open(target, "wb") as fh:
            shutil.copyfileobj(response, fh, 1 << 20)
        with zipfile.ZipFile(target) as zf:
            names = set(zf.namelist())
            texts = {
                n: zf.read(n).decode()
                for n in [*(p for p, _ in VLLM_LAYOUTS), VLLM_CONFIG]
                if n in names
            }
        full = scan_vllm(texts)
        full_s = time.perf_counter() - start
        full_bytes = target.stat().st_size
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    assert tuple(full["architectures"]) == result.architectures
    report = {
        "machine": describe(),
        "vllm": str(version),
        "wheel_bytes": wheel.size,
        "architectures": len(result.architectures),
        "range_read": {
            "seconds": round(ranged_s, 3),
            "bytes": ranged_bytes,
            "share_of_wheel_pct": round(100 * ranged_bytes / full_bytes, 3),
        },
        "full_download": {"seconds": round(full_s, 3), "bytes": full_bytes},
        "targets": {"seconds": 2.0, "share_of_wheel_pct": 1.0},
    }
    print(json.dumps(report, indent=2))
    ok = ranged_s < 2.0 and ranged_bytes < 0.01 * full_bytes
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
