"""cli/models.py at the click level: compat's targets and the one message for a profile
that does not pin vLLM and transformers exactly (the flows: tests/models/)."""

from __future__ import annotations

from pathlib import Path

from helpers import envkit


def test_compat_of_a_profile_without_both_pins_is_bad_input_with_the_one_message(
    tmp_path: Path,
) -> None:
    (tmp_path / "envs").mkdir()
    path = tmp_path / "envs" / "half.toml"
    path.write_text('python = "3.12"\nrequirements = ["vllm==0.8.5", "transformers>=4.51"]\n')
    res = envkit("compat", "half", cwd=tmp_path)
    assert res.code == 2, res
    assert "pins no exact transformers version" in res.err
    assert "envkit compat vllm==X transformers==Y" in res.err


def test_compat_takes_one_vllm_and_one_transformers_release(tmp_path: Path) -> None:
    for targets in (("vllm==0.8.5",), ("vllm==0.8.5", "torch==2.6.0"), ("vllm>=0.8", "x")):
        res = envkit("compat", *targets, cwd=tmp_path)
        assert res.code == 2, (targets, res)
