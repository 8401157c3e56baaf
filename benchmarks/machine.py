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

LOOP = 2_000_000
COMPILES = 20


def python_work() -> float:
    """The CPU seconds of a fixed pure-Python workload, best of 3: a loop of LOOP additions
    and COMPILES compilations of the standard library's ``argparse`` source (its text read
    once, outside the timing): the machine's speed at pure-Python work, beside its load (the
    same CPU model name has measured 2.5 times slower at every command of benchmarks/speed.py
    on one day than on another). It did not follow the commands' start-up figures alone:
    python_imports is recorded beside it."""
    import argparse

    source = Path(argparse.__file__).read_text(encoding="utf-8")
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        total = 0
        for i in range(LOOP):
            total += i
        for _ in range(COMPILES):
            compile(source, "argparse.py", "exec")
        best = min(best, time.process_time() - start)
    return round(best, 3)


IMPORTS = "import argparse, asyncio, dataclasses, email.message, json, pathlib, tarfile, zipfile"


def python_imports() -> float:
    """The CPU seconds of a new interpreter (``-I -S``) importing a fixed set of standard
    modules from their bytecode, best of 5: the machine's speed at starting a command. Both
    are recorded because python_work alone did not follow the commands' figures: on one
    evening it read 0.34-0.53 s in no order with ``--version``'s 0.11-0.19 s."""
    import resource
    import subprocess

    best = float("inf")
    for _ in range(5):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-I", "-S", "-c", IMPORTS], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        best = min(best, used)
    return round(best, 3)


def describe() -> dict[str, Any]:
    """CPU model and count, memory, the load average at the start, OS, Python, the date, and
    the machine's speed (python_work, python_imports)."""
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
        "python_work_s": python_work(),
        "python_imports_s": python_imports(),
        "cpu": cpu or "unknown",
        "cores": os.cpu_count(),
        "memory": memory,
        "load_average_1m": round(load[0], 2),
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "date": time.strftime("%Y-%m-%d"),
    }
