"""``envkit explain`` on a large boot log: throughput and peak memory.

Writes a log of ``--size`` (default 1 GB) of the noise a long-running vLLM prints (request
lines, throughput lines, progress bars, prefixed the way Compose and vLLM's processes
prefix them) with a cause buried near the end, then runs ``envkit explain --json`` on it in
a child process and reads the child's peak RSS (``ru_maxrss``). Targets: 50 MB/s or better,
under 100 MB. Run by hand (needs the disk for the log, removed afterwards):

    python benchmarks/explain_log.py [--size 1G] [--keep PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NOISE = (
    b'vllm-1  | (APIServer pid=1) INFO:     172.18.0.1:4%04d - "POST /v1/chat/completions '
    b'HTTP/1.1" 200 OK\n',
    b"vllm-1  | (APIServer pid=1) INFO 05-12 10:%02d:07 [loggers.py:123] Engine 000: Avg "
    b"prompt throughput: 312.4 tokens/s, Avg generation throughput: 48.1 tokens/s, Running: "
    b"3 reqs, Waiting: 0 reqs, GPU KV cache usage: 4.1%%, Prefix cache hit rate: 61.0%%\n",
    b"vllm-1  | (EngineCore_DP0 pid=88) INFO 05-12 10:%02d:08 [metrics.py:9] Scheduled 4 "
    b"requests in 0.8 ms\n",
    b"vllm-1  | Processed prompts:  %02d%%|\xe2\x96\x88\xe2\x96\x88       | 12/64 [00:03<00:12, "
    b"4.1it/s]\r\n",
)
CAUSE = (
    b"vllm-1  | (EngineCore_DP0 pid=88) ERROR 05-12 11:59:59 [core.py:700] EngineCore "
    b"failed to start.\n"
    b"vllm-1  | (EngineCore_DP0 pid=88) ERROR 05-12 11:59:59 [core.py:700] ValueError: Free "
    b"memory on device (6.98/8.0 GiB) on startup is less than desired GPU memory "
    b"utilization (0.9, 7.2 GiB). Decrease GPU memory utilization or reduce GPU memory used "
    b"by other processes.\n"
    b"vllm-1  | RuntimeError: Engine core initialization failed. See root cause above. "
    b"Failed core proc(s): {}\n"
)


def parse_size(text: str) -> int:
    units = {"K": 1000, "M": 1000**2, "G": 1000**3}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].isalpha() else int(text)


def write_log(path: Path, size: int) -> int:
    block = b"".join(
        NOISE[i % 4] % (i % 60,) if b"%0" in NOISE[i % 4] else NOISE[i % 4] for i in range(4000)
    )
    written = 0
    with path.open("wb") as f:
        f.write(
            b"vllm-1  | INFO 05-12 10:00:01 [api_server.py:1043] vLLM API server version 0.8.5\n"
        )
        while written < size - len(CAUSE):
            f.write(block)
            written += len(block)
        f.write(CAUSE)
    return path.stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="1G")
    parser.add_argument("--keep", type=Path, help="write the log here and keep it")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="envkit-bench-"))
    path = args.keep or folder / "big.log"
    try:
        size = write_log(path, parse_size(args.size))
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "envkit", "explain", str(path), "--json"],
            capture_output=True,
            text=True,
            check=False,
        )
        seconds = time.perf_counter() - start
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak_kib, cpu = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
        cause = json.loads(done.stdout)["cause"]
        print(
            json.dumps(
                {
                    "bytes": size,
                    "seconds": round(seconds, 2),
                    "mb_per_s": round(size / seconds / 1e6, 1),
                    # on a shared machine the wall clock waits for the others; CPU does not
                    "cpu_seconds": round(cpu, 2),
                    "mb_per_cpu_s": round(size / cpu / 1e6, 1),
                    "peak_rss_mb": round(peak_kib / 1024, 1),
                    "exit": done.returncode,
                    "cause": cause["code"],
                    "cause_line": cause["line"],
                },
                indent=2,
            )
        )
    finally:
        if not args.keep and path.exists():
            os.unlink(path)
        folder.rmdir()


if __name__ == "__main__":
    main()
