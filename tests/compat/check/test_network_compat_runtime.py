"""benchmarks/compat_runtime.py on three real pairs: installed from the package index,
started on CPU, compared with `envkit compat` (about 5 minutes and 8 GB at a time, each venv
removed after its pair). Run with ``python -m pytest -m network``.

What is asserted is what these pairs really do at start-up (measured), and compat's answer
where it is right today. For the aimv2 clash of 0.9.x, which compat does not see today (it
reads APIs, not registrations), the comparison must call compat's answer what it is: a
failure missed while compat says compatible, agreement once it says not.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from envkit.env.interpreters import find_interpreter

ROOT = Path(__file__).resolve().parents[3]  # the checkout
sys.path.insert(0, str(ROOT / "benchmarks"))

import compat_runtime  # noqa: E402
from compat_runtime_steps import Step  # noqa: E402

pytestmark = pytest.mark.network
# read at import: conftest's hermetic_uv clears ENVKIT_* variables before the fixtures run
SHARED_UV_CACHE = os.environ.get("ENVKIT_TEST_UV_CACHE")


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    work = tmp_path_factory.mktemp("compat-runtime")
    settings = compat_runtime.Settings(
        work=work,
        python=find_interpreter(">=3.9,<3.13").path,  # vLLM 0.8.5 and 0.9.2 stop before 3.13
        envkit=Path(sys.executable),
        all_classes=False,  # the core architectures only: a few seconds, not a minute
        min_free=12 * compat_runtime.GiB,
        uv_cache=Path(SHARED_UV_CACHE) if SHARED_UV_CACHE else None,
    )
    pairs = compat_runtime.parse_pairs("0.8.5:4.51.3,0.8.5:5.0.0,0.9.2:4.54.0")
    try:
        results = [
            compat_runtime.measure(p, settings, after=before)
            for before, p in zip([None, *pairs], pairs, strict=False)
        ]
    finally:
        shutil.rmtree(work / "uv-cache", ignore_errors=True)  # its own: two torches, 14 GB
    compat_runtime.judge(results)
    assert not list(work.glob("venv-*")), "each venv is removed right after its pair"
    return {r["pair"]: r for r in results}


def steps(result: dict[str, Any]) -> dict[str, Step]:
    return {s.name: s for s in compat_runtime.steps_from_json(result)}


def test_shipped_pin_starts_and_compat_agrees(measured: dict[str, dict[str, Any]]) -> None:
    r = measured["0.8.5+4.51.3"]
    assert r["install"]["ok"] and not r["install"]["overrides"]
    assert r["install"]["in_declared_range"] is True
    assert r["install"]["versions"]["transformers"] == "4.51.3"
    by = steps(r)
    for name in ("import-vllm", "config-package", "tokenizer:qwen2-bpe", "config:qwen2_vl"):
        assert by[name].ok, by[name]
    assert by["class:Qwen2VLForConditionalGeneration"].ok
    # the wrapper vLLM 0.8.5 puts around a tokenizer reads all_special_tokens_extended
    assert "all_special_tokens_extended" in by["tokenizer:qwen2-bpe"].detail["wrapper_reads"]
    assert r["compat"]["ok"] is True
    assert r["comparison"]["verdict"] == "agree"
    assert r["comparison"]["archs_compared"] >= 8


def test_transformers_5_breaks_the_tokenizer_step(measured: dict[str, dict[str, Any]]) -> None:
    r = measured["0.8.5+5.0.0"]
    by = steps(r)
    assert by["import-vllm"].ok and by["config-package"].ok
    tok = by["tokenizer:qwen2-bpe"]
    assert (tok.status, tok.error_type) == ("error", "AttributeError")
    assert "all_special_tokens_extended" in tok.message
    assert tok.origin.startswith("vllm/transformers_utils/tokenizer.py:")
    # Qwen2-VL's config: transformers 5 writes rope_type beside the legacy type "mrope"
    assert "mrope" in by["config:qwen2_vl"].message
    assert by["class:MiniCPMO"].error_type == "ImportError"
    assert r["comparison"]["runtime_ok"] is False
    assert r["comparison"]["failed_step"] == "tokenizer:qwen2-bpe"
    names = {f["name"] for f in r["compat"]["findings"] if not f["architectures"]}
    assert "all_special_tokens_extended" in names
    assert r["comparison"]["verdict"] == "agree"
    # the config step's failure is found too: compat reads the config's RoPE rule
    conflicts = {
        arch
        for f in r["compat"]["findings"]
        if f["code"] == "config-conflict"
        for arch in f["architectures"]
    }
    assert "Qwen2VLForConditionalGeneration" in conflicts
    missed = {d["scope"] for d in r["comparison"]["disagreements"] if d["kind"] == "missed"}
    assert "Qwen2VLForConditionalGeneration" not in missed


def test_aimv2_registration_clash(measured: dict[str, dict[str, Any]]) -> None:
    r = measured["0.9.2+4.54.0"]
    assert r["install"]["ok"] and r["install"]["in_declared_range"] is True
    by = steps(r)
    assert by["import-vllm"].ok  # 0.9.2 imports its config package lazily (0.9.0 does not)
    package = by["config-package"]
    # vLLM 0.9.x registers its own "aimv2" config; transformers 4.54 brought one
    assert (package.status, package.error_type) == ("error", "ValueError")
    assert "aimv2" in package.message
    assert package.origin.startswith("vllm/transformers_utils/configs/ovis.py:")
    assert not by["config:llama"].ok  # every config load goes through that package
    assert r["comparison"]["runtime_ok"] is False
    assert r["comparison"]["failed_step"] == "config-package"
    expected = "missed" if r["compat"]["ok"] else "agree"
    assert r["comparison"]["verdict"] in (expected, "agree-other-cause")
    # no architecture is judged when vLLM's config package does not import
    assert r["comparison"]["archs_compared"] == 0
