"""A failure none of envkit's handlers takes is a bug in envkit: it is said as one paragraph
(what was raised, where in envkit) with exit 1, and as an error document under ``--json``;
``ENVKIT_TRACEBACK=1``, which the suite sets, shows Python's traceback instead."""

from __future__ import annotations

import json

import pytest

from envkit import cli, render
from envkit.errors import TRACEBACK_VARIABLE

SECRET = "plain-words-that-are-a-password"  # no token shape: masked as the value it is


def _fails() -> None:
    raise ValueError(f"no such thing\nas {SECRET}\x1b[2J" + "x" * 400)


@pytest.mark.parametrize("json_asked", [False, True])
def test_a_bug_is_one_paragraph_and_exit_1(
    json_asked: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(TRACEBACK_VARIABLE, raising=False)
    monkeypatch.setenv("MY_SERVICE_PASSWORD", SECRET)  # the environment's secret never shows
    monkeypatch.setattr(render, "start", _fails)  # app.main's first step
    assert cli.main(["check-model", "p", "m", *(["--json"] if json_asked else [])]) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and SECRET not in out + err and "\x1b" not in err
    assert err.count("\n") == 1, err
    assert err.startswith("error: Internal error: ValueError: no such thing")
    assert "(cut at 300 characters) (in envkit/cli/app.py:" in err and ", main)." in err
    assert f"{TRACEBACK_VARIABLE}=1 to see the traceback" in err
    if json_asked:
        said = json.loads(out)
        assert (said["ok"], said["exit_code"], said["error"]) == (False, 1, "InternalError")
        assert said["message"].startswith("Internal error: ValueError: no such thing\nas ")
    else:
        assert out == ""


@pytest.mark.parametrize("value", ["1", "yes"])
def test_envkit_traceback_shows_the_bug_as_python_raised_it(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TRACEBACK_VARIABLE, value)
    monkeypatch.setattr(render, "start", _fails)
    with pytest.raises(ValueError, match="no such thing"):
        cli.main(["check-model", "p", "m"])


def test_envkit_traceback_0_is_unset(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(TRACEBACK_VARIABLE, "0")
    monkeypatch.setattr(render, "start", _fails)
    assert cli.main(["check-model", "p", "m"]) == 1
    assert "Internal error" in capsys.readouterr().err
