"""``envkit serve``'s handling of a child's output: ``io.pieces.Pieces`` (bounded pieces, as
the log file and the watch get them) and ``io.pieces.Screen`` (lines as a terminal shows
them), on a megabyte of each kind of output that could cost time or memory: carriage
returns alone, progress-bar updates, one-character updates, a line that never ends. Prints
the time and the peak memory Python allocated (tracemalloc) for each, read in 64 KiB
chunks as ``io.streaming.Streaming`` reads them. Run by hand:

    python benchmarks/serve_pieces.py
"""

from __future__ import annotations

import json
import time
import tracemalloc

from machine import describe  # benchmarks/machine.py, beside this script

from envkit.io.pieces import Pieces, Screen

MB = 1 << 20
CASES = {
    "carriage returns alone": b"\r" * MB,
    "bar updates (32 bytes each)": b"\rLoading  50% |#####     | 5/10" * (MB // 32),
    "one-character updates": b"a\r" * (MB // 2),
    "a line that never ends": b"x" * MB,
}


def run(data: bytes) -> dict[str, float]:
    tracemalloc.start()
    start = time.perf_counter()
    pieces, screen = Pieces(), Screen()
    count = 0
    for at in range(0, len(data), 64 * 1024):
        for piece in pieces.feed(data[at : at + 64 * 1024]):
            count += 1
            screen.feed(piece.decode("utf-8", "replace"))
    for piece in pieces.flush():
        screen.feed(piece.decode())
    screen.flush()
    took = time.perf_counter() - start
    _now, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"ms": round(took * 1000, 1), "pieces": count, "peak_kib": round(peak / 1024)}


def main() -> None:
    results = {name: run(data) for name, data in CASES.items()}
    print(json.dumps({"machine": describe(), "per_megabyte": results}, indent=2))


if __name__ == "__main__":
    main()
