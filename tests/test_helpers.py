"""The result helpers say what went wrong: the exit code expected and found, and what envkit
printed, so a failing test needs no second run to be understood."""

from __future__ import annotations

import pytest

from helpers import Result


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
