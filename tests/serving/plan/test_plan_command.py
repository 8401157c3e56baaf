"""envkit plan's printed command is pasted into a shell as the argv it shows, whatever the
values (item 5); the multimodal values enter the command in the form every vLLM takes."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.serving.command import Recommendation, serve_args, serve_command, shell_words

from helpers import ROOT, envkit
from registry_world import MODELS

values = st.dictionaries(
    st.text(max_size=12), st.integers(0, 10**7) | st.text(max_size=12), max_size=3
)


@settings(max_examples=examples(300), deadline=None)
@given(
    model=st.text(min_size=1, max_size=40),
    kwargs=st.none() | values,
    limits=st.none() | st.dictionaries(st.text(max_size=8), st.integers(0, 999), max_size=3),
    dtype=st.sampled_from(["half", "bfloat16", "float32"]),
    kv=st.sampled_from(["auto", "fp8"]),
)
def test_any_value_splits_back_into_the_argv(
    model: str,
    kwargs: dict[str, object] | None,
    limits: dict[str, int] | None,
    dtype: str,
    kv: str,
) -> None:
    rec = Recommendation(
        gpu_memory_utilization=0.9, max_model_len=4096, dtype=dtype,
        mm_processor_kwargs=kwargs, limit_mm_per_prompt=limits,
    )  # fmt: skip
    argv = ["vllm", "serve", model, *serve_args(rec, kv)]
    assert shlex.split(serve_command(model, rec, kv)) == argv
    assert shlex.split(shell_words(argv)) == argv
    if kwargs is not None:  # the JSON vLLM reads is the value asked
        assert json.loads(argv[argv.index("--mm-processor-kwargs") + 1]) == kwargs


def _recommended_line(out: str) -> str:
    (line,) = [ln for ln in out.splitlines() if ln.startswith("recommended: ")]
    return line.removeprefix("recommended: ")


PRINTABLE = st.characters(codec="ascii", categories=["L", "N", "P", "S", "Zs"])
NAMES = st.text(PRINTABLE, min_size=1, max_size=20).filter(
    lambda n: n.strip(" ./") and "/" not in n
)


@settings(max_examples=examples(15), deadline=None)
@given(name=NAMES)
def test_the_printed_plan_line_pastes_as_its_argv(name: str, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    """A model folder with quotes, spaces, $ or ; in its name, and the JSON flags: the line
    plan prints is the argv it means, word for word."""
    folder = tmp_path_factory.mktemp("m") / name
    folder.mkdir()
    source = MODELS / "Qwen2-VL-2B-Instruct"
    for file in ("config.json", "preprocessor_config.json"):
        (folder / file).write_bytes((source / file).read_bytes())
    res = envkit(
        "--envs", str(ROOT / "envs"), "plan", "vllm-0.8.5+qwen2-vl", str(folder),
        "--gpu", "rtx-4060", "--limit-mm-per-prompt", '{"image": 2}', cwd=folder.parent,
    )  # fmt: skip
    words = shlex.split(_recommended_line(res.out))
    assert words[:3] == ["vllm", "serve", str(folder)]
    assert words[words.index("--mm-processor-kwargs") + 1] == '{"max_pixels": 401408}'
    assert words[words.index("--limit-mm-per-prompt") + 1] == '{"image": 2}'


def test_the_json_flags_are_quoted_in_the_plan_line(tmp_path: Path) -> None:
    res = envkit(
        "--envs", str(ROOT / "envs"), "plan", "vllm-0.8.5+qwen2-vl",
        str(MODELS / "Qwen2-VL-2B-Instruct"), "--gpu", "rtx-4060", cwd=tmp_path,
    )  # fmt: skip
    assert "--mm-processor-kwargs '{\"max_pixels\": 401408}'" in _recommended_line(res.out)
