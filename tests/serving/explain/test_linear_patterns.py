"""Every regular expression explain runs on log text is linear: each pattern of
``signatures``, ``logfacts`` and ``logread`` against adversarial lines built from its own
literals and classes (:mod:`adversarial`), searched and full-matched.

Each pattern's lines are tried at 2 KiB, where a quadratic pattern is already a hundred
times slower than a linear one (a hundredth of a second of CPU against a tenth of a
millisecond), so the five slowest are the ones a backtracking pattern would be among; those
are run again at 32 KiB, where a linear pattern takes milliseconds and a quadratic one
seconds (``\\w*X`` searched in 16 KiB of ``a`` takes half a second of CPU here, so 32 KiB
takes four times that). All of it runs in one child process that gives each long line its
own CPU budget (``ITIMER_PROF``, whose signal ends the child: half a second, forty times
what the slowest linear line needs, a quarter of what one quadratic line needs, whatever
else the machine runs; ``RLIMIT_CPU`` on the whole child behind it), and prints each
pattern and line before it tries it, so a pattern that backtracks fails the test, named,
instead of hanging the suite. (How fast the linear ones are, on 1 MiB lines, is measured in
``benchmarks/explain_patterns.py``, not here.)
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from adversarial import lines, log_patterns, pieces

HERE = Path(__file__).resolve().parent.parent  # tests/serving: its fixture modules
LINE_SECONDS = 0.5  # of CPU for one long line: a linear one takes at most 12 ms, a quadratic 2 s
CPU_SECONDS = 15  # for the whole child: every pattern's lines take about 1.5 s together
DEADLINE = 240  # seconds on the wall clock, for a machine busy with other work

_CHILD = r"""
import resource, signal, sys
sys.path.insert(0, sys.argv[1])
resource.setrlimit(resource.RLIMIT_CPU, (int(sys.argv[2]), int(sys.argv[2]) + 5))
budget = float(sys.argv[3])
signal.signal(signal.SIGPROF, signal.SIG_DFL)  # the budget spent: the child ends by SIGPROF
from adversarial import exercise, hardest, named
for name in sys.argv[4:]:
    pattern = named(name)
    print("sweeping", name, flush=True)
    _shapes, long = hardest(pattern, sweep=2 << 10, long=32 << 10)
    for line in long:
        print("trying", name, repr(line[:40]), flush=True)
        signal.setitimer(signal.ITIMER_PROF, budget)
        exercise(pattern, line)
        signal.setitimer(signal.ITIMER_PROF, 0)
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
            [sys.executable, "-c", _CHILD, str(HERE), str(CPU_SECONDS), str(LINE_SECONDS), *names],
            capture_output=True,
            text=True,
            timeout=DEADLINE,
        )
    except subprocess.TimeoutExpired as stopped:
        out = stopped.stdout.decode() if isinstance(stopped.stdout, bytes) else stopped.stdout
        last = (out or "").strip().splitlines()[-1:] or ["(nothing tried)"]
        pytest.fail(f"a pattern backtracks on a 32 KiB line: {last[0]}")
    if ran.returncode == -signal.SIGPROF:  # one line took its whole budget
        last = ran.stdout.strip().splitlines()[-1:] or ["(nothing tried)"]
        pytest.fail(f"a pattern backtracks (past {LINE_SECONDS} s of CPU on a line): {last[0]}")
    if ran.returncode in (-signal.SIGXCPU, -signal.SIGKILL):  # at the limit, or 5 s past it
        last = ran.stdout.strip().splitlines()[-1:] or ["(nothing tried)"]
        pytest.fail(f"a pattern backtracks (past {CPU_SECONDS} s of CPU): {last[0]}")
    assert ran.returncode == 0, ran.stderr[-2000:]
    done = {line.split()[1] for line in ran.stdout.splitlines() if line.startswith("done ")}
    assert done == set(names)
