"""envkit compat: the transformers API a vLLM release uses and a transformers release lacks,
read from wheels the tests publish on a local index (real range requests, real parsing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import compat_world
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from properties import examples

import indexserver
from helpers import output, results_in, run_cli, said


def compat_world_line(text: str) -> int:
    """The line of the fake vLLM tokenizer source holding ``text``."""
    lines = compat_world.TOKENIZER_USE.splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


def compat(world: indexserver.Server, *args: str) -> tuple[int, dict[str, Any]]:
    res = run_cli("compat", *args, "--json", "--index-url", indexserver.url(world))
    assert not said(res.err).strip() or res.code == 2, res.err  # progress lines aside
    return res.code, output("compat", res.out)


def test_the_pair_of_report_1_names_the_removed_tokenizer_attribute(
    compat_world: indexserver.Server, scan_cache: Path
) -> None:
    code, data = compat(compat_world, "vllm==0.8.5", "transformers==5.0.0")
    assert code == 1 and data["ok"] is False
    assert data["reference"] == "4.51.3"  # 4.52.0 came out after vLLM 0.8.5
    found = {(f["code"], f["name"]): f for f in data["findings"]}
    attr = found["removed-attribute", "all_special_tokens_extended"]
    # each finding is a result too: an error (it breaks vLLM as a whole), where vLLM uses it
    assert [r["code"] for r in results_in(data)].count("removed-attribute") >= 1
    assert (attr["severity"], attr["subject"]) == ("error", "all_special_tokens_extended")
    assert attr["file"] == "vllm/transformers_utils/tokenizer.py"
    line = compat_world_line("special = tokenizer.all_special_tokens_extended")
    assert attr["line"] == line and attr["places"] == 1  # the class's own property is no use
    assert attr["architectures"] == []  # vLLM itself breaks
    assert attr["module"] == "transformers.tokenization_utils_fast.PreTrainedTokenizerFast"
    # a name dropped from a model module breaks only the architectures using that file
    name = found["missing-name", "WHISPER_ATTENTION_CLASSES"]
    assert name["architectures"] == ["Qwen2VLForConditionalGeneration"]
    assert name["places"] == 2  # the model file, and the helper only it imports
    # what cannot fail is not reported: guarded and type-checking imports, names a
    # __getattr__ answers, reads an except AttributeError catches, a module alias, a name a
    # lazy package exports from its folder, a method kept under a new class name
    names = {f["name"] for f in data["findings"]}
    assert not names & {
        "AddedInAFarFutureRelease", "transformers.tokenization_utils_never", "bos_token_id",
        "eos_token_id", "only_sometimes_there", "transformers.tokenization_utils_fast",
        "WhisperFeatureExtractor", "PreTrainedTokenizerFast",
    }  # fmt: skip
    assert set(found) == {
        ("removed-attribute", "all_special_tokens_extended"),
        ("missing-name", "WHISPER_ATTENTION_CLASSES"),
    }


def test_the_pinned_pair_is_clean_and_the_answer_is_cached(
    compat_world: indexserver.Server, scan_cache: Path
) -> None:
    code, data = compat(compat_world, "vllm==0.8.5", "transformers==4.51.3")
    assert (code, data["ok"], data["findings"]) == (0, True, [])
    assert data["cost"]["cached"] is False
    assert data["cost"]["bytes_read"] < data["cost"]["wheel_bytes"] * 0.5  # padding unread
    stored = list((scan_cache / "compat").glob("*.json"))
    assert len(stored) == 1
    sent = compat_world.sent
    code, again = compat(compat_world, "transformers==4.51.3", "vllm==0.8.5")  # any order
    assert again["cost"]["cached"] is True and again["findings"] == []
    assert compat_world.sent == sent  # nothing read


def test_text_view(compat_world: indexserver.Server, scan_cache: Path) -> None:
    res = run_cli(
        "compat", "vllm==0.8.5", "transformers==5.0.0", "--index-url", indexserver.url(compat_world)
    )
    assert res.code == 1
    assert "not compatible" in res.out
    at = compat_world_line("special = tokenizer.all_special_tokens_extended")
    assert f"vllm/transformers_utils/tokenizer.py:{at}" in res.out
    assert "breaks only: Qwen2VLForConditionalGeneration" in res.out


@pytest.mark.parametrize(
    "args",
    [
        ("vllm==0.8.5",),
        ("vllm==0.8.5", "vllm==0.9.2"),
        ("vllm>=0.8", "transformers==4.51.3"),
        ("numpy==1.0", "transformers==4.51.3"),
        ("vllm==0.8.5", "transformers==4.51.3", "transformers==5.0.0"),
    ],
)
def test_bad_pairs_are_one_message_and_exit_2(
    compat_world: indexserver.Server, scan_cache: Path, args: tuple[str, ...]
) -> None:
    res = run_cli("compat", *args, "--json", "--index-url", indexserver.url(compat_world))
    assert res.code == 2
    assert json.loads(res.out)["ok"] is False and "Traceback" not in res.err


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    first=st.text(min_size=1, max_size=30).filter(lambda t: not t.startswith("-")),
    second=st.sampled_from(["transformers==4.51.3", "transformers==9.9.9", "vllm==0.0.1", "x"]),
)
def test_any_arguments_are_a_verdict_or_one_message(
    compat_world: indexserver.Server, scan_cache: Path, first: str, second: str
) -> None:
    res = run_cli("compat", first, second, "--json", "--index-url", indexserver.url(compat_world))
    assert res.code in (0, 1, 2)
    data = json.loads(res.out)
    assert "Traceback" not in res.err
    if res.code == 2:
        assert data["ok"] is False and data["message"]


def test_lock_refuses_pins_that_fail_compat_and_writes_nothing(
    compat_world: indexserver.Server, scan_cache: Path, tmp_path: Path
) -> None:
    envs = tmp_path / "envs"
    envs.mkdir()
    (envs / "broken.toml").write_text(
        'python = ">=3.10"\nrequirements = ["vllm==0.8.5"]\n'
        'constraints = ["transformers==5.0.0"]\n\n[matrix]\npython = ["3.11"]\n'
    )
    index = indexserver.url(compat_world)
    res = run_cli("--envs", str(envs), "lock", "broken", "--json", "--index-url", index)
    assert res.code == 1, res.err
    (cell,) = output("lock", res.out)["cells"]
    assert cell["state"] == "incompatible"
    assert "all_special_tokens_extended" in cell["reason"]
    assert "vllm/transformers_utils/tokenizer.py" in cell["reason"]
    assert not (tmp_path / "constraints").exists()  # refused before uv ran: no file


def test_removed_in_bisects_the_releases_between(
    compat_world: indexserver.Server, scan_cache: Path
) -> None:
    code, data = compat(compat_world, "vllm==0.8.5", "transformers==5.0.0", "--removed-in")
    assert code == 1 and data["dated"] is True
    removed = {f["name"]: f["removed_in"] for f in data["findings"]}
    # 4.52.0 still has both (it is 4.51.3's shape): 5.0.0 removed them
    assert removed == {"all_special_tokens_extended": "5.0.0", "WHISPER_ATTENTION_CLASSES": "5.0.0"}
    code, again = compat(compat_world, "vllm==0.8.5", "transformers==5.0.0")
    assert again["dated"] is True and again["cost"]["cached"] is True  # kept in the cache
