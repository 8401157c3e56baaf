"""cli/env.py at the click level: verify's exit code and message for a venv that is not
there (the flow itself: tests/env/test_verify.py)."""

from __future__ import annotations

from pathlib import Path

from helpers import envkit, profile_text


def test_verify_without_a_venv(tmp_path: Path) -> None:
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "good.toml").write_text(profile_text())
    res = envkit("verify", "good", "--venv", "nowhere", cwd=tmp_path)
    assert res.code == 2
    assert "no environment to check" in res.err and "envkit build" in res.err
    assert not (tmp_path / ".envkit").exists()  # nothing created beside a venv that is not there
