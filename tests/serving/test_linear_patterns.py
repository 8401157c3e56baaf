"""Every regular expression explain runs on log text is linear: each pattern of
``signatures``, ``logfacts`` and ``logread`` against adversarial lines built from its own
literals and classes (:mod:`adversarial`), searched and full-matched.

Each pattern's lines are tried at 16 KiB, where a quadratic pattern is already a thousand
times slower than a linear one; its five slowest are run again at 1 MiB, where a quadratic
one would take hours. All of it runs in a child process with a deadline, which prints each
pattern and line before it tries it, so a pattern that backtracks fails the test at the
deadline, named, instead of hanging the suite. (How fast the linear ones are is measured in
``benchmarks/explain_patterns.py``, not here.)
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from adversarial import lines, pieces

from envkit.serving import logfacts, logread, signatures

HERE = Path(__file__).resolve().parent
MODULES = (signatures, logfacts, logread)
DEADLINE = 240  # seconds for every pattern; linear ones take a few together

_CHILD = r"""
import importlib, re, sys, time
sys.path.insert(0, sys.argv[1])
from adversarial import lines
from envkit.serving import signatures
for name in sys.argv[2:]:
    module, attr = name.rsplit(".", 1)
    if module == "SIGNATURES":
        pattern = signatures.SIGNATURES[int(attr)].pattern
    else:
        pattern = getattr(importlib.import_module(module), attr)
    print("sweeping", name, flush=True)
    timed = []
    for i, line in enumerate(lines(pattern, 16 << 10)):
        start = time.perf_counter()
        pattern.search(line)
        pattern.fullmatch(line)
        timed.append((time.perf_counter() - start, i))
    slowest = {i for _, i in sorted(timed, reverse=True)[:5]}
    for i, line in enumerate(lines(pattern, 1 << 20)):  # the same shapes, 64 times longer
        if i in slowest:
            print("trying", name, repr(line[:40]), flush=True)
            pattern.search(line)
            pattern.fullmatch(line)
    print("done", name, flush=True)
"""


def _patterns() -> dict[str, re.Pattern[str]]:
    found: dict[str, re.Pattern[str]] = {}
    for module in MODULES:
        for attr, value in vars(module).items():
            if isinstance(value, re.Pattern):
                found[f"{module.__name__}.{attr}"] = value
    for i, sig in enumerate(signatures.SIGNATURES):
        found[f"SIGNATURES.{i}"] = sig.pattern
    return found


def test_the_generator_builds_lines_from_a_patterns_own_pieces() -> None:
    literals, chars = pieces(re.compile(r"(?P<o>\w*(?:Tokenizer|Config)\w*) has no attribute"))
    assert {"Tokenizer", "Config", " has no attribute"} <= set(literals)
    assert {"a", "_", "0"} <= set(chars)
    made = list(lines(re.compile(r"ab.*c"), 64))
    assert "ab" * 32 in made and len(set(made)) == len(made)


def test_every_pattern_on_log_text_is_linear() -> None:
    names = list(_patterns())
    assert len(names) > 30
    try:
        ran = subprocess.run(
            [sys.executable, "-c", _CHILD, str(HERE), *names],
            capture_output=True,
            text=True,
            timeout=DEADLINE,
        )
    except subprocess.TimeoutExpired as stopped:
        out = stopped.stdout.decode() if isinstance(stopped.stdout, bytes) else stopped.stdout
        last = (out or "").strip().splitlines()[-1:] or ["(nothing tried)"]
        pytest.fail(f"a pattern backtracks on a 1 MiB line: {last[0]}")
    assert ran.returncode == 0, ran.stderr[-2000:]
    done = {line.split()[1] for line in ran.stdout.splitlines() if line.startswith("done ")}
    assert done == set(names)
