"""Random and mutated inputs through the real entry points (``cli.main``): profiles,
config.json and preprocessor_config.json, index pages and server answers. Whatever comes in,
envkit answers with a message and exit 0, 1 or 2: never a traceback, never a secret."""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import loopback
import pytest
import tomlkit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from properties import examples

from helpers import profile_text, run_cli

FUZZ = settings(
    max_examples=examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
NETWORK_FUZZ = settings(FUZZ, max_examples=examples(15))  # each example is a real loopback exchange
KEY = "sk-fuzz-0123456789abcdef"

# text that includes what broke envkit before: other scripts' digits, NUL, huge numbers
texts = st.one_of(
    st.text(max_size=20),
    st.sampled_from(
        [
            "3.12",
            "\u0663.\u0661\u0662",
            "cu124",
            "cu\u0661\u0662\u0664",
            "not-a-date",
            "2025-13-45",
            "",
            " ",
            "x" * 300,
        ]
    ),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    texts,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)


def _toml_values() -> st.SearchStrategy[Any]:
    plain = st.one_of(
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        texts,
    )
    return st.recursive(
        plain,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=3),
        max_leaves=10,
    )


# built once: a strategy made inside each draw is set up again for every example
toml_values = _toml_values()

PROFILE_KEYS = {
    "": ["description", "python", "requirements", "constraints", "exclude_newer", "typo_key"],
    "torch": ["backend", "cuda"],
    "matrix": ["python", "platforms", "backends"],
    "verify": ["versions", "imports", "probes"],
    "models": ["vllm", "transformers", "architectures", "model_types", "out_of_tree"],
}


@st.composite
def profile_documents(draw: st.DrawFn) -> str:
    base = tomlkit.parse(profile_text())
    for table, keys in PROFILE_KEYS.items():
        for key in draw(st.lists(st.sampled_from(keys), max_size=3, unique=True)):
            value = draw(toml_values)
            if table:
                section = base.setdefault(table, tomlkit.table())
                if isinstance(section, dict):
                    section[key] = value
                else:
                    base[table] = value
            else:
                base[key] = value
    text = tomlkit.dumps(base)
    if draw(st.booleans()):  # and a textual mutation now and then
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.text(max_size=5)) + text[at + draw(st.integers(0, 5)) :]
    return text


@pytest.fixture(scope="module")
def server() -> Iterator[loopback.Scripted]:
    """One loopback server for every example; each example sets its routes."""
    with loopback.serve() as running:
        yield running


@pytest.fixture
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        root = Path(tmp)
        (root / "envs").mkdir()
        (root / "envs" / "good.toml").write_text(profile_text())
        yield root


def assert_answered(res: Any) -> None:
    assert res.code in (0, 1, 2), res
    assert "Traceback" not in res.out + res.err


@FUZZ
@given(text=profile_documents())
def test_random_profiles(text: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(folder)
    monkeypatch.setenv("ENVKIT_ENVS", str(folder / "envs"))  # this folder alone
    path = folder / "envs" / "fuzz.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    for args in (
        ("show", "fuzz"),
        ("profiles", "--json"),
        ("matrix", "--json"),
        ("lock", "--all", "--check"),
    ):
        res = run_cli(*args)
        assert_answered(res)
    # a broken profile does not hide the good one
    listing = run_cli("profiles", "--json")
    names = {p["name"] for p in json.loads(listing.out)["profiles"]}
    assert "good" in names


MODEL_KEYS = [
    "model_type", "architectures", "num_hidden_layers", "num_attention_heads", "hidden_size",
    "num_key_value_heads", "head_dim", "vocab_size", "intermediate_size", "torch_dtype",
    "max_position_embeddings", "layer_types", "kv_lora_rank", "num_experts", "text_config",
    "vision_config", "auto_map", "tie_word_embeddings",
]  # fmt: skip
VALID_CONFIG = {
    "model_type": "qwen2",
    "architectures": ["Qwen2ForCausalLM"],
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "hidden_size": 64,
    "vocab_size": 1000,
    "torch_dtype": "bfloat16",
}


@st.composite
def configs(draw: st.DrawFn) -> dict[str, Any]:
    config: dict[str, Any] = dict(VALID_CONFIG)
    for key in draw(st.lists(st.sampled_from(MODEL_KEYS), max_size=4, unique=True)):
        config[key] = draw(json_values)
    return config


@st.composite
def preprocessors(draw: st.DrawFn) -> Any:
    keys = ["patch_size", "merge_size", "max_pixels", "size", "min_pixels"]
    chosen = draw(st.lists(st.sampled_from(keys), max_size=4, unique=True))
    return {key: draw(json_values) for key in chosen} if draw(st.booleans()) else draw(json_values)


def dump(value: Any) -> str:
    return json.dumps(value, allow_nan=True)


@FUZZ
@given(config=configs(), pre=preprocessors(), with_index=st.booleans(), total=json_values)
def test_random_model_files(
    config: dict[str, Any], pre: Any, with_index: bool, total: Any, folder: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(folder)
    model = folder / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(dump(config))
    (model / "preprocessor_config.json").write_text(dump(pre))
    index = model / "model.safetensors.index.json"
    if with_index:
        index.write_text(dump({"metadata": {"total_size": total}}))
    elif index.exists():
        index.unlink()
    for args in (
        ("check-model", "good", str(model)),
        ("plan", "good", str(model), "--gpu-memory", "24GiB", "--json"),
        ("plan", "good", str(model), "--gpu-memory", "8GiB", "--max-model-len", "4096"),
    ):
        res = run_cli(*args)
        assert_answered(res)
        if args[0] == "plan" and res.code != 2 and "--json" in args:
            data = json.loads(res.out)
            rec = data["recommended"]
            assert rec["max_model_len"] >= 0 and 0 <= rec["gpu_memory_utilization"] <= 1
            assert all(
                not isinstance(v, float) or math.isfinite(v) for v in data["memory"].values()
            )


@FUZZ
@given(
    body=st.one_of(
        json_values.map(dump), st.binary(max_size=200).map(lambda b: b.decode("latin-1"))
    )
)
def test_random_index_pages(body: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(folder / "cache"))
    route = {
        "/simple/vllm/": lambda h: h.send(
            200, body.encode("utf-8", "surrogatepass"), "application/vnd.pypi.simple.v1+json"
        )
    }
    with loopback.serve(route) as server:
        res = run_cli("scan", "vllm==0.8.5", "--index-url", loopback.origin(server) + "/simple")
    assert_answered(res)
    assert res.code == 2


@NETWORK_FUZZ
@given(
    status=st.sampled_from([200, 200, 201, 301, 400, 401, 404, 500, 503]),
    models=json_values,
    reply=json_values,
    echo=st.booleans(),
)
def test_random_server_answers(
    status: int,
    models: Any,
    reply: Any,
    echo: bool,
    server: loopback.Scripted,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FUZZ_KEY", KEY)

    def answer(value: Any):  # type: ignore[no-untyped-def]
        def route(handler: loopback.Handler) -> None:
            sent = handler.headers.get("Authorization", "") if echo else ""
            body = dump({"data": value, "echo": sent}) if isinstance(value, list) else dump(value)
            handler.send(status, (body + sent).encode())

        return route

    with loopback.serve(
        {"/v1/models": answer(models), "/v1/chat/completions": answer(reply)}
    ) as server:
        for extra in ((), ("--json",)):
            res = run_cli(
                "probe", loopback.origin(server) + "/v1", "--api-key-env", "FUZZ_KEY",
                "--timeout", "5", *extra,
            )  # fmt: skip
            assert_answered(res)
            assert KEY not in res.out + res.err
