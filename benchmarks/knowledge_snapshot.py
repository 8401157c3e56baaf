"""Writing and verifying a knowledge snapshot the size of every shipped profile's knowledge
and more, synthetic: what ``envkit --knowledge FILE`` costs each command before it starts
(read, directory check, digest, every member's sha256 and size, page lists parsed).

    python benchmarks/knowledge_snapshot.py [--entries 400] [--entry-kb 120] [--rounds 5]

The default, 400 entries of 120 KB (48 MB of JSON) and index lists of 1,000 wheels each for
vllm, transformers and torch, is above what ``knowledge export --all --history`` keeps for
envkit's shipped profiles (scans of ~100 vLLM releases are the bulk). Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from machine import describe  # benchmarks/machine.py, beside this script
from packaging.version import Version

from envkit.index import snapshot
from envkit.index.pages import WheelFile
from envkit.io.urls import DEFAULT_INDEX


def _pages(files: int) -> dict[str, snapshot.Listing]:
    out = {}
    for project in ("vllm", "transformers", "torch"):
        wheels = tuple(
            WheelFile(
                f"{project}-0.{n}.0-cp312-cp312-manylinux1_x86_64.whl",
                f"https://files.example/{project}/{n}.whl",
                100_000_000,
                Version(f"0.{n}.0"),
                "2025-01-01T00:00:00Z",
                ">=3.9",
                f"{n:064x}",
            )
            for n in range(files)
        )
        out[project] = snapshot.Listing(wheels, ())
    return out


def _entries(count: int, size_kb: int) -> dict[str, str]:
    body = json.dumps({"architectures": [f"Arch{n}ForCausalLM" for n in range(size_kb * 40)]})
    body = body[: size_kb * 1000 - 20] + '"]}' if len(body) > size_kb * 1000 else body
    return {f"scans/vllm-0.{n}.0.abcdef012345.v2.json": body for n in range(count)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=400)
    parser.add_argument("--entry-kb", type=int, default=120)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    pages, entries = _pages(args.files), _entries(args.entries, args.entry_kb)
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "k.zip"
        writes, reads = [], []
        for _ in range(args.rounds):
            start = time.perf_counter()
            snapshot.write(path, index=DEFAULT_INDEX, made_for=["x"], pages=pages, entries=entries)
            writes.append(time.perf_counter() - start)
            start = time.perf_counter()
            snapshot.read(path)
            reads.append(time.perf_counter() - start)
        size = path.stat().st_size
    json.dump(
        {
            "machine": describe(),
            "entries": args.entries,
            "entry_bytes": len(next(iter(entries.values()))),
            "json_bytes": sum(len(t) for t in entries.values()),
            "wheels_listed": 3 * args.files,
            "snapshot_bytes": size,
            "write_seconds_median": round(statistics.median(writes), 3),
            "read_and_verify_seconds_median": round(statistics.median(reads), 3),
        },
        sys.stdout,
        indent=2,
    )
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
