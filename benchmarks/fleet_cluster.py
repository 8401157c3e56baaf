"""``envkit fleet check --ray`` on a local Ray cluster: how long the cluster takes to start and
how long the check takes, cold (first tasks start the workers) and warm.

Starts ``--nodes`` nodes (default 3) on 127.0.0.1 with ``ray.cluster_utils.Cluster``, one
CPU each, then runs ``envkit fleet check PROFILE --ray ADDRESS --cell CELL --no-hashes --json``
twice in a child process against the environment envkit runs in (its packages are not the
lock's, so the check exits 1: what is measured is the round trip, not the verdict). Needs Ray
(``pip install 'envkit[ray]'``). Run by hand:

    python benchmarks/fleet_cluster.py [--nodes 3] [--profile vllm-0.8.5+qwen2-vl]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--profile", default="vllm-0.8.5+qwen2-vl")
    parser.add_argument("--cell", default="py3.12-linux-x86_64-cu124")
    args = parser.parse_args()
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # before Ray is imported: loopback
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "120")
    from ray.cluster_utils import Cluster

    node: dict[str, Any] = {
        "num_cpus": 1,
        "node_ip_address": "127.0.0.1",
        "include_dashboard": False,
    }
    start = time.perf_counter()
    cluster = Cluster()
    retries = 0
    for index in range(args.nodes):
        for attempt in range(4):  # a raylet must register within Ray's 30 s
            try:
                cluster.add_node(**node, node_name=f"node-{index}")
                break
            except Exception:
                retries += 1
                if attempt == 3:
                    raise
    cluster.wait_for_nodes()
    started = time.perf_counter() - start
    runs = []
    try:
        for _ in range(2):
            begin = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "envkit", "fleet", "check", args.profile, "--ray",
                 cluster.address, "--cell", args.cell, "--no-hashes", "--json"],
                capture_output=True, text=True, timeout=600, check=False,
            )  # fmt: skip
            runs.append(time.perf_counter() - begin)
            answered = sum(n["answered"] for n in json.loads(done.stdout)["nodes"])
    finally:
        cluster.shutdown()  # type: ignore[no-untyped-call]
    print(
        json.dumps(
            {
                "nodes": args.nodes,
                "answered": answered,
                "cluster_start_s": round(started, 1),
                "node_start_retries": retries,
                "check_cold_s": round(runs[0], 1),
                "check_warm_s": round(runs[1], 1),
                "load_average": os.getloadavg()[0],
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
