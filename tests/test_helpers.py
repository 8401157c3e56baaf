"""The result helpers say what went wrong: the exit code expected and found, and what envkit
printed, so a failing test needs no second run to be understood."""

from __future__ import annotations

from pathlib import Path

import pytest
from forked import envkit_forked, forked_cpu

from helpers import Result, envkit_process


def test_assert_ok_shows_the_code_and_what_envkit_said() -> None:
    Result(0, "fine\n", "").assert_ok()
    with pytest.raises(AssertionError) as caught:
        Result(2, "", "error: no such profile\n").assert_ok()
    assert "exit 2, expected 0" in str(caught.value)
    assert "error: no such profile" in str(caught.value)


def test_assert_fails_checks_the_code_and_every_mention() -> None:
    Result(1, "", "vllm 0.8.5 + transformers 5.0.0: not compatible\n").assert_fails(
        1, mentioning=("0.8.5", "not compatible")
    )
    with pytest.raises(AssertionError, match="exit 1, expected 2"):
        Result(1, "", "x").assert_fails(2)
    with pytest.raises(AssertionError, match=r"'4\.51\.3'"):
        Result(1, "", "pin transformers").assert_fails(1, mentioning="4.51.3")


def test_a_forked_envkit_says_and_ends_as_a_fresh_one(tmp_path: Path) -> None:
    """envkit_forked (a child of a warm interpreter) against envkit_process (a new one): the
    same exit, the same words, the run's own folder and environment, a kill at a step."""
    for args, env in (
        (["show", "nope"], {}),
        (["profiles", "--json"], {"COLUMNS": "40"}),
        (["show", "nope"], {"ENVKIT_FAULT": "command-import=KILL"}),
        (["show", "nope"], {"ENVKIT_FAULT": "command-import=INT"}),
    ):
        fresh = envkit_process(*args, cwd=tmp_path, env=env)
        forked = envkit_forked(*args, cwd=tmp_path, env=env)
        assert (forked.code, forked.out, forked.err) == (fresh.code, fresh.out, fresh.err), args
    assert fresh.code == 130 and forked_cpu() > 0
