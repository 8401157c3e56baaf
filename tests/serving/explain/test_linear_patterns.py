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
from adversarial import lines, log_patterns, pieces

HERE = Path(__file__).resolve().parent.parent  # tests/serving: its fixture modules
DEADLINE = 240  # seconds for every pattern; linear ones take a few together

_CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
from adversarial import exercise, hardest, named
for name in sys.argv[2:]:
    pattern = named(name)
    print("sweeping", name, flush=True)
    _shapes, long = hardest(pattern)
    for line in long:
        print("trying", name, repr(line[:40]), flush=True)
        exercise(pattern, line)
    print("done", name, flush=True)
"""


def test_the_generator_builds_lines_from_a_patterns_own_pieces() -> None:
    literals, chars = pieces(re.compile(r"(?P<o>\w*(?:Tokenizer|Config)\w*) has no attribute"))
    assert {"Tokenizer", "Config", " has no attribute"} <= set(literals)
    assert {"a", "_", "0"} <= set(chars)
    made = list(lines(re.compile(r"ab.*c"), 64))
    assert "ab" * 32 in made and len(set(made)) == len(made)


def test_every_pattern_on_log_text_is_linear() -> None:
    names = list(log_patterns())
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
