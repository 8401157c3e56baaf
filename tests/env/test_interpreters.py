"""Finding and asking interpreters: answers remembered by the binary that gave them (a replaced
binary, a script or a changed start-up environment is asked again), and the candidates that
cannot be newer than the one found never run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from envkit.env import interpreters
from envkit.env.interpreters import ask_version, binary_key, find_interpreter
from envkit.errors import ToolNotFound
from envkit.io import process

REAL = Path(os.path.realpath(sys.executable))
VERSION = ".".join(str(v) for v in sys.version_info[:3])


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """The programs envkit runs from here on, each still run for real; a cache folder and
    this process's answers of their own."""
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(interpreters, "_asked", {})
    ran: list[str] = []
    real_run = process.run

    def run(args: Sequence[str], **kwargs: Any) -> process.Completed:
        ran.append(args[0])
        return real_run(args, **kwargs)

    monkeypatch.setattr(process, "run", run)
    return ran


def copied_python(venv: Path) -> Path:
    """A venv whose interpreter is a copy of this one (``venv --copies``, as an upgrade of
    the system's Python replaces a file)."""
    python = venv / "bin" / "python3"
    python.parent.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {REAL.parent}\n")
    shutil.copy2(REAL, python)
    ran = subprocess.run([python, "-c", "pass"], capture_output=True, text=True, check=False)
    if ran.returncode != 0:  # a build that finds its library beside its own path only
        pytest.skip(f"a copy of {REAL} does not run elsewhere: {ran.stderr.strip()[-200:]}")
    return python


def test_an_answer_is_remembered_until_the_binary_is_replaced(
    asked: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = copied_python(tmp_path / "venv")
    first = ask_version(python)
    assert first is not None and str(first.version) == VERSION and first.path == python
    assert ask_version(python) == first and len(asked) == 1  # this process remembers
    monkeypatch.setattr(interpreters, "_asked", {})  # as the next process starts
    assert ask_version(python) == first and len(asked) == 1  # from the user cache
    # the same bytes, size and modification time, but another file: asked again
    shutil.copy2(REAL, python.with_name("replacement"))
    os.replace(python.with_name("replacement"), python)
    assert ask_version(python) == first and len(asked) == 2
    # what the interpreter reads as it starts is part of the answer's key
    monkeypatch.setenv("PYTHONNOUSERSITE", "1")
    assert ask_version(python) == first and len(asked) == 3
    assert ask_version(python) == first and len(asked) == 3
    # and so is the venv's pyvenv.cfg (which Python a launcher runs, on some systems)
    (python.parent.parent / "pyvenv.cfg").write_text(f"home = {REAL.parent}\nversion = x\n")
    assert ask_version(python) == first and len(asked) == 4


def test_a_script_is_asked_every_time(asked: list[str], tmp_path: Path) -> None:
    """A shim's answer depends on the environment and the folder: it is never remembered."""
    shim = tmp_path / "python3"
    shim.write_text(f'#!/bin/sh\nexec "{REAL}" "$@"\n')
    shim.chmod(0o755)
    assert binary_key(shim) is None
    answers = [ask_version(shim) for _ in range(2)]
    assert answers[0] == answers[1] and answers[0] is not None
    assert str(answers[0].version) == VERSION and len(asked) == 2
    assert not (tmp_path / "cache" / "pythons").exists()


def test_a_json_module_in_the_current_folder_does_not_answer(
    asked: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "json.py").write_text("raise SystemExit(3)\n")
    monkeypatch.chdir(tmp_path)
    found = ask_version(Path(sys.executable))
    assert found is not None and str(found.version) == VERSION


def test_a_bad_cache_entry_is_asked_again(asked: list[str], tmp_path: Path) -> None:
    first = ask_version(Path(sys.executable))
    (entry,) = (tmp_path / "cache" / "pythons").iterdir()
    entry.write_text('{"version": "3.11", "executable": "relative/python"}')
    interpreters._asked.clear()
    assert ask_version(Path(sys.executable)) == first and len(asked) == 2


def test_an_interpreter_named_older_than_the_one_found_never_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    on_path = tmp_path / "path"
    on_path.mkdir()
    (on_path / f"python3.{sys.version_info[1]}").symlink_to(REAL)
    old = tmp_path / "pyenv" / "versions" / "2.7.18" / "bin" / "python3"
    old.parent.mkdir(parents=True)
    ran = tmp_path / "old-ran"
    old.write_text(f"#!/bin/sh\necho ran >> '{ran}'\nexit 1\n")
    old.chmod(0o755)
    monkeypatch.setenv("PATH", str(on_path))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "uv"))
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    found = find_interpreter(">=2.7")
    assert str(found.version) == VERSION and found.path.parent == on_path
    assert not ran.exists()
    # when nothing newer is found, it is asked, and the message says what it answered
    with pytest.raises(ToolNotFound) as raised:
        find_interpreter("<3")
    assert ran.read_text() == "ran\n"
    assert "versions found there and asked: none that fit the name" in raised.value.message


def test_a_version_outside_the_profiles_python_is_said_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--python 3.9 for a profile of >=3.11,<3.13 is no interpreter to look for: it says so,
    not 'none installed'; an allowed version not installed names each folder looked in once."""
    from envkit.errors import UnusableInterpreter

    on_path = tmp_path / "path"
    on_path.mkdir()
    monkeypatch.setenv("PATH", os.pathsep.join([str(on_path), str(on_path)]))  # named twice
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("UV_PYTHON_INSTALL_DIR", str(tmp_path / "uv"))
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path / "cache"))
    for asked in ("3.9", ">=3.14"):
        with pytest.raises(UnusableInterpreter, match="is outside the Python the profile asks"):
            find_interpreter(">=3.11,<3.13", asked)
    with pytest.raises(ToolNotFound) as raised:
        find_interpreter(">=3.11,<3.13", "3.12.9")
    assert raised.value.message.count(f"PATH: {on_path};") == 1
