"""`envkit show` says the NVIDIA driver a profile's torch build needs, in text and --json."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import ROOT, output, run_cli


def shown(*args: str) -> str:
    res = run_cli("--envs", str(ROOT / "envs"), "show", *args)
    res.assert_ok()
    return " ".join(res.out.split())  # the table folds long values onto more lines


@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("vllm-0.8.5+qwen2-vl", "driver CUDA 12.4 or newer (NVIDIA driver 550.54.14 or newer)"),
        ("vllm-0.9.2", "driver CUDA 12.6 or newer (NVIDIA driver 560.28.03 or newer)"),
        ("vllm-0.17.1+qwen3.5", "driver CUDA 12.8 or newer (NVIDIA driver 570.26 or newer)"),
        ("vllm-0.33.0", "driver CUDA 13.0 or newer (NVIDIA driver 580.65.06 or newer)"),
    ],
)
def test_show_says_the_driver_of_each_shipped_profile(name: str, line: str) -> None:
    assert line in shown(name)


def test_show_json_carries_the_driver() -> None:
    res = run_cli("--envs", str(ROOT / "envs"), "show", "vllm-0.8.5+qwen2-vl", "--json")
    data = output("show", res.assert_ok().out)
    assert data["driver"] == {
        "cuda": "12.4",
        "linux_driver": "550.54.14",
        "minor_compat_floor": "525.60.13",
    }
    # and the older driver minor-version compatibility allows, said beside it in text
    assert "driver 525.60.13 or newer also starts it" in shown("vllm-0.8.5+qwen2-vl")
    assert "also starts it" not in shown("vllm-0.33.0")  # 13.0's floor is its driver


def test_a_cpu_profile_needs_no_driver(tmp_path: Path) -> None:
    (tmp_path / "cpu.toml").write_text(
        'python = "3.12"\nrequirements = ["vllm==0.8.5"]\n[torch]\nbackend = "cpu"\n'
    )
    (tmp_path / "bare.toml").write_text('python = "3.12"\nrequirements = ["vllm==0.8.5"]\n')
    for name, said in (("cpu", "no GPU driver (a CPU build)"), ("bare", "not stated")):
        res = run_cli("--envs", str(tmp_path), "show", name, "--json")
        assert output("show", res.assert_ok().out)["driver"] is None
        text = run_cli("--envs", str(tmp_path), "show", name).assert_ok().out
        assert f"driver           {said}" in text, text


def test_the_show_pages_rows_are_shows_own() -> None:
    text = (ROOT / "docs" / "commands" / "show.md").read_text()
    start = text.index("these are rows of `envkit show vllm-0.8.5+qwen2-vl`:\n\n```text\n")
    block = text[start:].split("```text\n", 1)[1].split("```", 1)[0]
    res = run_cli("--envs", str(ROOT / "envs"), "show", "vllm-0.8.5+qwen2-vl")
    assert block in res.assert_ok().out  # the same lines, in a row, at the default width
