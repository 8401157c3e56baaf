"""Never cut when not a terminal: text to a pipe or a file is complete (folded at word
boundaries, never cut with `…`); on a terminal a cell too long for its column is cut, and
the run ends with a hint that --wide shows it whole."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envkit.render import term

from helpers import ROOT, envkit, run_cli
from registry_world import MODELS

HINT = "envkit: cells cut (…) to fit the terminal; add --wide to see them whole"


@pytest.fixture
def deep_model(tmp_path: Path) -> Path:
    """A model folder whose path is longer than any terminal line."""
    folder = tmp_path / ("a-rather-long-folder-name-" * 5) / "Qwen2-VL-2B-Instruct"
    shutil.copytree(MODELS / "Qwen2-VL-2B-Instruct", folder)
    return folder


def test_piped_output_is_whole(deep_model: Path, tmp_path: Path) -> None:
    res = envkit(
        "--envs", str(ROOT / "envs"), "check-model", "vllm-0.8.5+qwen2-vl", str(deep_model),
        cwd=tmp_path, env={"COLUMNS": "60"},
    )  # fmt: skip
    assert res.code == 0
    assert f"model {deep_model}/config.json" in res.out.splitlines()
    assert "…" not in res.out + res.err and HINT not in res.err


def test_on_a_terminal_cells_are_cut_and_the_hint_names_wide(
    deep_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(term, "on_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", "60")
    monkeypatch.chdir(tmp_path)
    args = ["--envs", str(ROOT / "envs"), "check-model", "vllm-0.8.5+qwen2-vl", str(deep_model)]
    cut = run_cli(*args)
    first = cut.out.splitlines()[0]
    assert first.startswith("…") and first.endswith("Qwen2-VL-2B-Instruct/config.json")
    assert len(first) == 60
    assert HINT in cut.err
    # --wide (after the command, as before it) shows it whole, and there is nothing to hint
    wide = run_cli(*args, "--wide")
    assert f"model {deep_model}/config.json" in wide.out.splitlines()
    assert HINT not in wide.err


def test_fold_and_table_keep_every_word_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    term.set_wide(False)  # as every run starts (an earlier run may have asked --wide)
    path = "/a/" + "b" * 80 + "/c.txt"
    assert term.fold(f"found at {path} twice", 30) == ["found at", path, "twice"]
    table = term.table([("name", f"lives in {path}")])
    assert path in table.split()  # the long word is not broken across lines
    assert term.cut(path, 20) == path  # not a terminal: nothing is cut
    monkeypatch.setattr(term, "on_terminal", lambda: True)
    assert term.cut(path, 20) == path[:19] + "…" and term.fold(path, 20) == [path[:19] + "…"]
