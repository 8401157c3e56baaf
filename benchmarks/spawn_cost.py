"""The CPU one child costs envkit to start (``io.process.run``), in a parent holding MB of memory.

A child started with a ``preexec_fn`` is forked (the parent's page tables copied, then torn
down when the child execs); without one, CPython starts it by vfork. For each size given (MB,
touched so that they are resident), this runs ``true`` ROUNDS times through ``process.run``
and prints the CPU per child: user + system of this process and of its waited-for children,
which is where both the copy and the teardown are counted.

    python benchmarks/spawn_cost.py [MB ...]          # default: 0 50 300
    ENVKIT_SETPRIV= python benchmarks/spawn_cost.py   # the path without setpriv (forked)
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time

from machine import describe

from envkit.io import process

ROUNDS = 200


def cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def per_child(megabytes: int) -> tuple[float, float]:
    held = bytearray(megabytes * 1024 * 1024)
    for at in range(0, len(held), 4096):  # resident, one write a page
        held[at] = 1
    process.run(["true"])  # the first start finds the program (and probes setpriv)
    start_cpu, start_wall = cpu(), time.monotonic()
    for _ in range(ROUNDS):
        process.run(["true"])
    spent, wall = cpu() - start_cpu, time.monotonic() - start_wall
    del held
    return spent / ROUNDS * 1000, wall / ROUNDS * 1000


def main() -> int:
    sizes = [int(a) for a in sys.argv[1:]] or [0, 50, 300]
    print(json.dumps(describe()))
    print(f"ENVKIT_SETPRIV={os.environ.get('ENVKIT_SETPRIV', '(unset)')!r}, {ROUNDS} children each")
    for mb in sizes:
        ms_cpu, ms_wall = per_child(mb)
        print(f"parent holding {mb:4d} MB: {ms_cpu:6.2f} ms CPU, {ms_wall:6.2f} ms wall per child")
    return 0


if __name__ == "__main__":
    sys.exit(main())
