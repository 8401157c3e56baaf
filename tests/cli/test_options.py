"""One parser per kind of option value (cli.options): every command that takes a compute
capability, a card or a size takes the same forms and refuses the same way, with one message;
the multimodal values plan and serve take are parsed once, as vLLM takes them."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import click
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.cli.group import COMMAND_MODULES, load
from envkit.errors import BadInput
from envkit.serving.command import MmKwargs, MmLimits

from helpers import ROOT, envkit

ENVS = ["--envs", str(ROOT / "envs")]
# each command that takes a GPU, with arguments that get it past click to the option values
# (a profile that does not exist: the value is checked first, where it enters)
GPU_COMMANDS = {
    "plan": ["plan", "no-such-profile", "m"],
    "serve": ["serve", "no-such-profile", "m"],
    "check-model": ["check-model", "no-such-profile", "m"],
    "which": ["which", "m"],
    "verify": ["verify", "no-such-profile"],
    "build": ["build", "no-such-profile"],
    "doctor": ["doctor", "--profile", "no-such-profile"],
    "new-profile": ["new-profile", "x", "--for-model", "m"],
    "export": ["export", "no-such-profile", "m", "--to", "kubernetes"],
    "upgrade": ["upgrade", "no-such-profile"],
}


def _options(name: str) -> set[str]:
    return {opt for p in load(name).params for opt in p.opts}


def _every_option() -> set[str]:
    return {opt for name in COMMAND_MODULES for opt in _options(name)}


def test_the_table_covers_every_command_with_a_gpu_option() -> None:
    assert {n for n in COMMAND_MODULES if "--compute-capability" in _options(n)} == set(
        GPU_COMMANDS
    )


@pytest.mark.parametrize("name", sorted(GPU_COMMANDS))
def test_every_command_takes_sm_86_and_refuses_seven_alike(name: str, tmp_path: Path) -> None:
    args = [*ENVS, *GPU_COMMANDS[name]]
    taken = envkit(*args, "--compute-capability", "sm_86", cwd=tmp_path)
    assert "compute capability" not in taken.err  # past the option: the profile is what fails
    bad = envkit(*args, "--compute-capability", "seven", cwd=tmp_path)
    assert bad.code == 2
    assert "--compute-capability 'seven' is not a compute capability such as 8.6" in bad.err


def test_plan_plans_with_sm_86(tmp_path: Path) -> None:
    """report: plan refused what check-model took."""
    model = ROOT / "tests" / "fixtures" / "models" / "Qwen2-VL-2B-Instruct"
    res = envkit(
        *ENVS, "plan", "vllm-0.8.5+qwen2-vl", str(model), "--gpu-memory", "24GiB",
        "--compute-capability", "sm_86", "--json", cwd=tmp_path,
    )  # fmt: skip
    assert res.code in (0, 1) and res.json()["recommended"]["dtype"] == "bfloat16"
    old = envkit(
        *ENVS, "plan", "vllm-0.8.5+qwen2-vl", str(model), "--gpu-memory", "8GiB",
        "--compute-capability", "75", "--json", cwd=tmp_path,
    )  # fmt: skip
    assert old.json()["recommended"]["dtype"] == "half"


@pytest.mark.parametrize("name", sorted(GPU_COMMANDS))
def test_an_unknown_card_hints_only_options_the_command_has(name: str, tmp_path: Path) -> None:
    """verify has no --gpu-memory: its hint must not name it; plan's does."""
    res = envkit(*ENVS, *GPU_COMMANDS[name], "--gpu", "rtx-4061", cwd=tmp_path)
    assert res.code == 2 and "is not a card envkit knows" in res.err
    assert "Did you mean rtx-4060" in res.err
    named = (
        set(opt.rstrip(".,;") for opt in res.err.split() if opt.startswith("--")) & _every_option()
    )
    assert named <= _options(name), named - _options(name)
    assert ("--gpu-memory" in res.err) == ("--gpu-memory" in _options(name))


@pytest.mark.parametrize("option", ["--gpu-memory", "--free", "--reserve"])
def test_every_size_option_refuses_a_bare_number_with_one_message(
    option: str, tmp_path: Path
) -> None:
    extra = [] if option == "--gpu-memory" else ["--gpu-memory", "8GiB"]
    res = envkit(*ENVS, "plan", "vllm-0.9.2", "m", *extra, option, "8", cwd=tmp_path)
    assert res.code == 2 and f"{option} '8' is not a size with a unit." in res.err


def test_limit_mm_per_prompt_forms() -> None:
    assert MmLimits.parse('{"image": 2, "video": 0}').to_dict() == {"image": 2, "video": 0}
    kv = MmLimits.parse("image=2,video=1")
    assert kv.key_value and kv.flag() == '{"image": 2, "video": 1}'
    assert MmLimits.parse('{"image": 0}').get("image") == 0
    for bad, said in [
        ("image", "not a JSON object"),
        ('{"image": -1}', "out of range"),
        ('{"image": true}', "whole number"),
        ('{"image": 1.5}', "whole number"),
        ('{"image": {"count": 2}}', "item counts"),
        ('{"Image!": 2}', "not a modality"),
        ("[" * 5000, "at most"),
        ("[" * 2000, "not a JSON object"),
        ("image=1,image=2", "twice"),
    ]:
        with pytest.raises(BadInput, match=said):
            MmLimits.parse(bad)


def test_mm_processor_kwargs_forms() -> None:
    kwargs = MmKwargs.parse('{"max_pixels": 524288, "min_pixels": 3136, "fps": 2.0}')
    assert kwargs.max_pixels == 524288
    assert list(kwargs.to_dict()) == ["max_pixels", "min_pixels", "fps"]
    for bad in ['{"max_pixels": 0}', '{"max_pixels": "big"}', '{"max_pixels": NaN}',
                '{"a": [1]}', '{"fps": Infinity}', "max_pixels=5"]:  # fmt: skip
        with pytest.raises(BadInput):
            MmKwargs.parse(bad)


# the strings st.from_regex drew for these patterns, built from their parts: the same
# space, at under half the cost per example (the regex engine's drawing was most of the time)
LOWER, DIGITS = "abcdefghijklmnopqrstuvwxyz", "0123456789"
PAIRS = st.lists(
    st.tuples(st.text(LOWER, min_size=1, max_size=6), st.text(DIGITS, min_size=1, max_size=3)),
    min_size=1,
).map(lambda pairs: ",".join(f"{key}={count}" for key, count in pairs))
# r"[a-z]{1,6}=[0-9]{1,3}(,[a-z]{1,6}=[0-9]{1,3})*" searched for, not matched whole: any
# text around it
KEY_VALUES = st.tuples(st.text(max_size=4), PAIRS, st.text(max_size=4)).map("".join)
# r"[a-z][a-z0-9_]{0,10}", matched whole
NAMES = st.builds(
    lambda head, tail: head + tail,
    st.sampled_from(LOWER),
    st.text(LOWER + DIGITS + "_", max_size=10),
)


# each example is two parses of a short text: 150 reach the JSON, key=value and length
# refusals every run (ENVKIT_HYPOTHESIS=thorough tries ten times as many)
@settings(max_examples=examples(150), deadline=None)
@given(st.text(max_size=200) | KEY_VALUES)
def test_any_text_is_limits_or_bad_input(text: str) -> None:
    for parse in (MmLimits.parse, MmKwargs.parse):
        try:
            value = parse(text)
        except BadInput as exc:
            assert exc.message and "\n" not in exc.message[:0]
            continue
        # what is taken goes back out as JSON vLLM reads to the same value
        out = value.flag() if isinstance(value, MmLimits) else json.dumps(value.to_dict())
        assert json.loads(out) == value.to_dict()


@settings(max_examples=examples(200), deadline=None)
@given(st.dictionaries(NAMES, st.integers(0, 100_000), max_size=4))
def test_limits_round_trip_through_the_shell(counts: dict[str, int]) -> None:
    limits = MmLimits.parse(json.dumps(counts))
    assert limits.to_dict() == counts
    assert shlex.split(shlex.quote(limits.flag())) == [json.dumps(counts)]


def test_options_are_click_options_with_callbacks() -> None:
    """Each GPU value goes through the one parser of its kind, whatever the command."""
    from envkit.cli import options

    kinds = {
        "--gpu": options.parse_card,
        "--compute-capability": options.parse_capability,
        "--driver": options.parse_driver,
    }
    for name in GPU_COMMANDS:
        for param in load(name).params:
            if isinstance(param, click.Option) and param.opts[0] in kinds:
                assert param.callback is kinds[param.opts[0]], (name, param.opts[0])


def test_a_missing_choice_lists_its_choices_on_the_error_line(tmp_path: Path) -> None:
    """click lays a missing option's choices out on lines of their own, which the one-line
    error showed as escapes (``Choose from:\\n\\tkubernetes,\\n\\t...``)."""
    res = envkit("export", "vllm-0.8.5+qwen2-vl", "org/m", "--gpu", "h100-80gb", cwd=tmp_path)
    assert res.code == 2
    first = res.err.splitlines()[0]
    assert first == (
        "error: Missing option '--to'. Choose from: kubernetes, production-stack, kserve, "
        "ray, slurm"
    )
    typed = envkit("export", "vllm-0.8.5+qwen2-vl", "org/m", "--to", "x\n\ty", cwd=tmp_path)
    assert typed.code == 2 and "'x\\n\\ty' is not one of" in typed.err  # a value stays escaped
