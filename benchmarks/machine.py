"""The machine and conditions a benchmark ran on, printed with its numbers: the figures
of docs/benchmarks.md name them, since the same command takes twice as long on a busy shared
machine."""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path
from typing import Any


def describe() -> dict[str, Any]:
    """CPU model and count, memory, the load average at the start, OS, Python, the date."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        cpu = platform.processor()
    memory = ""
    try:
        kib = next(
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal:")
        )
        memory = f"{kib / 1024 / 1024:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {
        "cpu": cpu or "unknown",
        "cores": os.cpu_count(),
        "memory": memory,
        "load_average_1m": round(load[0], 2),
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "date": time.strftime("%Y-%m-%d"),
    }
