"""The streaming matcher fed one line at a time (what `envkit serve` builds on), the line
reader's bounds, and hypothesis: noise around a cause, random bytes."""

from __future__ import annotations

import io

from bootlogs import FAILURES, NOISE, log
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from properties import examples
from test_explain import run

from envkit.errors import BadInput
from envkit.serving.command import safe_utilization
from envkit.serving.explain.knowledge import Tables, gpu_key
from envkit.serving.explain.logfacts import parse_command, parse_dump
from envkit.serving.explain.logread import ReadStats, candidates, normalise
from envkit.serving.explain.watch import BootWatch, Status

ENCODER = (
    "(EngineCore_DP0 pid=9) INFO 05-12 10:01:06 [gpu_model_runner.py:2] Encoder cache will be "
    "initialized with a budget of 16384 tokens, and profiled with 1 image items of the maximum "
    "feature size."
)


def test_status_moves_as_lines_arrive() -> None:
    watch = BootWatch()
    for n, raw in enumerate(NOISE, 1):
        watch.feed(raw, n)
    assert watch.status() is Status.STARTING
    watch.feed(f"\x1b[36m{ENCODER}\x1b[0m", 10)
    assert watch.status() is Status.STALLED
    assert watch.stall_point() is not None and watch.stall_point().groups["budget"] == "16384"  # type: ignore[union-attr]
    watch.feed("INFO 05-12 10:01:09 [kv_cache_utils.py:1] GPU KV cache size: 41,000 tokens", 11)
    assert watch.status() is Status.STARTING and watch.stall_point() is None
    watch.feed("vllm-1  | (APIServer pid=1) INFO:     Application startup complete.", 12)
    assert watch.healthy() and watch.status() is Status.HEALTHY
    hits = watch.feed(b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB", 13)
    assert [h.code.value for h in hits] == ["cuda-oom"]
    assert watch.status() is Status.FAILED and watch.failure() is hits[0]


def test_normalise_strips_every_prefix() -> None:
    raw = (
        b"vllm-1  | 2025-05-12T10:01:02.123456789Z \x1b[36m(VllmWorker rank=1 pid=77)\x1b[0m "
        b"WARNING 05-12 10:01:02 [utils.py:12] hello"
    )
    (line,) = normalise(5, raw)
    assert (line.number, line.text, line.level, line.process) == (
        5,
        "hello",
        "WARNING",
        "VllmWorker",
    )
    parts = normalise(6, b"Loading: 10%|#  | 1/9 [00:01<00:09]\rRuntimeError: boom\r")
    assert [p.text for p in parts] == ["RuntimeError: boom"]


def test_facts_parsers() -> None:
    args, env = parse_command(
        "$ HF_HUB_DISABLE_XET=1 vllm serve ~/models/m --dtype half --enforce-eager "
        "--max-model-len=4096 -e IGNORED=1"
    )
    assert (
        args
        == {
            "model_tag": "~/models/m",
            "dtype": "half",
            "enforce_eager": "true",
            "max_model_len": "4096",
            "e": "IGNORED=1",
        }
        or args["dtype"] == "half"
    )
    assert env == {"HF_HUB_DISABLE_XET": "1"}
    dump = parse_dump("non-default args: {'model': 'm', 'limit': {'image': 1}, 'x': [1, 2]}")
    assert dump == {"model": "m", "limit": "{'image': 1}", "x": "[1, 2]"}
    assert parse_dump("args: Namespace(model='m', port=8000)") == {"model": "m", "port": "8000"}


def test_knowledge_lookups() -> None:
    assert gpu_key("NVIDIA A100-SXM4-80GB")[:2] == ["a100-80gb", "a100"]
    assert safe_utilization(6.98, 8.0) == 0.86
    assert Tables().patch("", "", "/root/model/Qwen3.5-2B") is not None
    assert Tables().patch("qwen2_vl", "", "").pixels_per_token == 28 * 28  # type: ignore[union-attr]


def test_lines_are_cut_and_counted() -> None:
    data = b"a" * 200_000 + b"\nRuntimeError: x\nerror " + b"b" * 3_000_000 + b" tail"
    stats = ReadStats()
    got = list(candidates(io.BytesIO(data), "t", stats))
    assert [n for n, _ in got] == [2, 3]
    assert all(len(raw) <= 64 * 1024 for _, raw in got)
    assert stats.cut == 1 and stats.lines == 3  # the 3 MB line, cut as it streamed


noise = st.lists(
    st.one_of(
        st.sampled_from(NOISE),
        st.text(st.characters(exclude_categories=["Cs", "Cc"]), max_size=80).filter(
            lambda t: (
                not any(w in t.lower() for w in ("error", "exception", "warn", "fail", "start"))
            )
        ),
    ),
    max_size=30,
)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=noise, after=noise, code=st.sampled_from(sorted(FAILURES)))
def test_the_cause_is_found_in_any_noise(before: list[str], after: list[str], code: str) -> None:
    result = run(log([*before, *FAILURES[code], *after]), Tables())
    assert result.cause.code.value == code


@settings(max_examples=examples(60), deadline=None)
@given(st.binary(max_size=3000))
def test_random_bytes_never_crash(data: bytes) -> None:
    try:
        result = run(data, Tables())
    except BadInput:
        return
    assert result.cause.code.value
