"""Terminal conventions: NO_COLOR and FORCE_COLOR, folding instead of cutting (--wide to
keep lines whole), progress on a terminal only, JSON usage errors, profile-name completion."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import envkit, envkit_process, profile_text, run_cli

LONG = "word " * 60


@pytest.fixture
def here(project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(project)
    (project / "envs" / "long.toml").write_text(
        profile_text().replace(
            'description = "test profile"', f'description = "{LONG.strip()} end"'
        )
    )
    return project


def test_no_color_wins_over_force_color(here: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert "\x1b[" in run_cli("show", "nope").err  # forced, though stderr is not a terminal
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" not in run_cli("show", "nope").err


def test_long_text_is_folded_not_cut_and_wide_keeps_it_whole(here: Path) -> None:
    folded = run_cli("profiles").out
    assert "…" not in folded and "end" in folded  # every word is still there
    line = next(ln for ln in folded.splitlines() if ln.startswith("long"))
    assert len(line) <= 100
    wide = run_cli("--wide", "profiles").out
    assert any(ln.startswith("long") and ln.rstrip().endswith("end") for ln in wide.splitlines())


def test_usage_errors_are_json_under_json(here: Path) -> None:
    res = run_cli("lock", "--jobs", "0", "--json")
    assert res.code == 2
    data = json.loads(res.out)
    assert data["ok"] is False and data["error"] == "UsageError" and "--jobs" in data["message"]


def on_a_terminal(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> bytes:
    """What envkit writes to stderr when stderr is a real terminal (a pty)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "envkit", *args],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=follower,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
    )
    os.close(follower)
    proc.wait(timeout=120)
    seen = b""
    try:
        while chunk := os.read(leader, 4096):
            seen += chunk
    except OSError:
        pass  # the terminal closed with the process
    os.close(leader)
    return seen


def test_no_color_on_a_real_terminal(here: Path) -> None:
    assert b"\x1b[" in on_a_terminal(["show", "nope"], here)
    assert b"\x1b[" not in on_a_terminal(["show", "nope"], here, {"NO_COLOR": "1"})


def test_progress_is_a_line_per_step_piped_and_a_live_line_on_a_terminal(
    built_copy: Path,
) -> None:
    piped = envkit("verify", "good", cwd=built_copy)
    assert piped.code == 0
    steps = [ln for ln in piped.err.splitlines() if ln.startswith("envkit: [")]
    # one line per step, each with the seconds since the command began: the imports, the
    # pair against compat (whose wheels are read: the test index is out of reach), kernels
    assert len(steps) == 4, piped.err
    assert re.fullmatch(
        r"envkit: \[ +[0-9]+\.[0-9] s\] verifying .*\.venv: importing vllm, "
        r"transformers, torch in its interpreter \(one run\)",
        steps[0],
    )
    assert "checking vLLM 0.8.5 + transformers 4.51.3 against compat's findings" in steps[1]
    assert "checking the compiled modules' GPU code and symbols (ELF files)" in steps[3]
    seen = on_a_terminal(["verify", "good"], built_copy)
    # on a terminal: a live line (wiped and redrawn in place) with the step's seconds, which
    # becomes the step's line when the next step begins (the step's start is seconds after
    # the command's, however loaded the machine: only its shape is asserted)
    assert b"\r\x1b[K" in seen and re.search(
        rb"envkit: \[ +[0-9]+\.[0-9] s\] verifying .*  \([0-9]+ s\)", seen
    )
    assert b"GPU code and symbols (ELF files)\x1b[0m\r\n" in seen


def test_profile_names_complete(here: Path) -> None:
    env = {"_ENVKIT_COMPLETE": "bash_complete", "COMP_WORDS": "envkit build lo", "COMP_CWORD": "2"}
    res = envkit_process(cwd=here, env=env)
    assert "plain,long" in res.out.splitlines()
