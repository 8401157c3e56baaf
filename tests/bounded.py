"""envkit in a child process whose memory is limited: many ``cli.main`` runs per child.

For the tests where the process boundary is the thing tested: an attack that would block
(a FIFO), grow without end (/dev/zero) or take more memory than allowed must not take the
test run with it. Each case runs ``cli.main`` in one child limited to LIMIT_MB of address
space (an interpreter start is the slow part, so cases share one), with its own
environment, and reports its exit code, output and seconds; a case that blocked ends the
child at its timeout and fails the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import Result

MiB = 1024 * 1024
LIMIT_MB = 300  # the memory no input may make envkit exceed

_DRIVER = """
import resource, sys
limit = int(sys.argv[1])  # before envkit is imported: all of it runs within the limit
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
import contextlib, io, json, os, time
from envkit import cli
out = []
for cwd, argv, env in json.load(sys.stdin):
    os.chdir(cwd)
    saved = dict(os.environ)
    os.environ.update(env)
    stdout, stderr = io.StringIO(), io.StringIO()
    start = time.monotonic()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = cli.main(argv)
    out.append([code, stdout.getvalue(), stderr.getvalue(), time.monotonic() - start])
    os.environ.clear()
    os.environ.update(saved)
sys.__stdout__.write(json.dumps(out))
"""

Case = tuple[Path, list[str]] | tuple[Path, list[str], dict[str, str]]


def bounded_cases(cases: list[Case]) -> list[tuple[Result, float]]:
    """Each (cwd, argv[, env]) through cli.main, all in one child whose address space is
    limited to LIMIT_MB (its first act, before envkit is imported); each case's result and
    seconds."""

    given = [[str(c[0]), c[1], c[2] if len(c) == 3 else {}] for c in cases]
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER, str(LIMIT_MB * MiB)],  # the child limits itself: no
        # preexec_fn, whose fork copies the worker's page tables (a vfork does not)
        input=json.dumps(given),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MALLOC_ARENA_MAX": "2"},  # each thread's arena reserves 64 MB
    )
    assert done.returncode == 0, done.stderr
    return [(Result(code, out, err), took) for code, out, err, took in json.loads(done.stdout)]
