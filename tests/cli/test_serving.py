"""cli/serving.py at the click level: explain's arguments, exit codes, standard input and
JSON shape; serve's refusals before anything starts. The flows are tested in their core
mirrors (tests/serving/explain/test_explaining.py, tests/serving/run/test_start.py)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from bootlogs import FAILURES, log, preamble

from helpers import envkit, profile_text, valid_output


def test_cli_exit_codes_stdin_and_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = tmp_path / "good.log"
    good.write_text("\n".join([*preamble(), "INFO:     Application startup complete."]))
    res = envkit("explain", str(good), "--json", cwd=tmp_path)
    res.assert_ok()
    data = res.json()
    valid_output("explain", data)
    assert data["cause"]["code"] == "none" and data["facts"]["vllm_version"] == "0.8.5"
    stdin = io.TextIOWrapper(io.BytesIO(log(FAILURES["uva-unavailable"]).encode()))
    monkeypatch.setattr("sys.stdin", stdin)
    res = envkit("explain", "-", cwd=tmp_path)
    assert res.code == 1 and "uva-unavailable" in res.out and "vLLM 0.8.5 does not read" in res.out
    binary = tmp_path / "core.bin"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)
    res = envkit("explain", str(binary), cwd=tmp_path)
    assert res.code == 2 and "not a text log" in res.err and res.err.count("\n") == 1
    for bad in (("explain", str(tmp_path / "missing.log")), ("explain", "a", "b")):
        assert envkit(*bad, cwd=tmp_path).code == 2
    (tmp_path / "empty.log").write_bytes(b"")
    assert envkit("explain", str(tmp_path / "empty.log"), cwd=tmp_path).code == 2
    (tmp_path / "one.log").write_bytes(b"\0")  # counts of one said as one
    assert (
        "NUL bytes or invalid text in its first 1 byte."
        in envkit("explain", "one.log", cwd=tmp_path).err
    )
    (tmp_path / "one.log").write_text("hello\n")
    said = envkit("explain", "one.log", cwd=tmp_path).out
    assert "one.log: 1 line" in said and "1 lines" not in said


def test_explain_diff_takes_two_files(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text("\n".join(preamble()))
    for args in (("--diff", "a.log"), ("--diff", "a.log", "-"), ("--diff", "a.log", "a", "b")):
        res = envkit("explain", *args, cwd=tmp_path)
        assert res.code == 2 and "--diff compares two log files" in res.err, res


def test_serve_refuses_an_argument_it_sets_itself_before_starting(tmp_path: Path) -> None:
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "p.toml").write_text(profile_text())
    program = tmp_path / ".venv" / "bin" / "vllm"
    program.parent.mkdir(parents=True)
    program.write_text("#!/bin/sh\nexit 3\n")
    program.chmod(0o755)
    res = envkit("serve", "p", "m", "--no-plan", "--", "--port=9", cwd=tmp_path)
    assert res.code == 2 and "'--port=9' after --" in res.err, res
    assert not (tmp_path / ".envkit" / "logs").exists()  # nothing started, no log
