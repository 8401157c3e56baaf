"""Bad values are refused where they enter, naming the file, field and value (exit 2); one
broken profile does not stop commands about the others."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from envkit.io.uv import network_failure

from helpers import FIXTURES, profile_text, run_cli

MODEL = FIXTURES / "models" / "Qwen2-VL-2B-Instruct"


@pytest.fixture
def here(project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(project)
    shutil.copytree(MODEL, project / "model")
    return project


@pytest.mark.parametrize(
    ("extra", "key", "shown"),
    [
        ('[matrix]\npython = ["\u0663.\u0661\u0662"]\n', "matrix.python", "\u0663.\u0661\u0662"),
        ('exclude_newer = "not-a-date"\n', "exclude_newer", "not-a-date"),
        ('exclude_newer = "2025-02-30"\n', "exclude_newer", "2025-02-30"),
    ],
)
def test_profile_values_are_checked(here: Path, extra: str, key: str, shown: str) -> None:
    (here / "envs" / "bad.toml").write_text(profile_text(extra=extra))
    res = run_cli("show", "bad")
    assert res.code == 2
    assert f"[{key}]" in res.err and shown in res.err


def test_a_backend_in_other_digits_is_refused(here: Path) -> None:
    (here / "envs" / "bad.toml").write_text(profile_text(backend="cu\u0661\u0662\u0664"))
    res = run_cli("show", "bad")
    assert res.code == 2 and "[torch.backend]" in res.err


def test_one_broken_profile_does_not_stop_the_others(here: Path) -> None:
    (here / "envs" / "bad.toml").write_text(profile_text(extra='[matrix]\npython = ["3.x"]\n'))
    listing = run_cli("profiles", "--json")
    assert listing.code == 2
    data = json.loads(listing.out)
    names = {p["name"] for p in data["profiles"]}
    assert {"good", "unpinned"} <= names and "bad" not in names  # and the shipped ones
    assert len(data["invalid"]) == 1
    matrix = run_cli("matrix", "--json")
    assert matrix.code == 2 and "skipped a broken profile" in matrix.err
    assert {c["profile"] for c in json.loads(matrix.out)["cells"]} == {"good", "unpinned"}
    which = run_cli("which", "model", "--json")
    assert which.code in (0, 1) and "skipped a broken profile" in which.err


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("num_attention_heads", 0, "num_attention_heads is 0"),
        ("num_hidden_layers", -28, "num_hidden_layers is -28"),
        ("hidden_size", "1536", 'hidden_size is "1536", not a whole number'),
        ("torch_dtype", "float64", 'torch_dtype "float64" is not a dtype vLLM serves'),
        ("max_position_embeddings", 1.5, "max_position_embeddings is 1.5"),
    ],
)
def test_plan_refuses_bad_config_values(
    here: Path, field: str, value: object, message: str
) -> None:
    config = json.loads((here / "model" / "config.json").read_text())
    config[field] = value
    (here / "model" / "config.json").write_text(json.dumps(config))
    res = run_cli("plan", "good", "model", "--gpu-memory", "24GiB")
    assert res.code == 2, res.out
    assert message in res.err and "config.json" in res.err


@pytest.mark.parametrize("value", [-1, 0, "big", None])
def test_plan_refuses_bad_max_pixels(here: Path, value: object) -> None:
    pre = json.loads((here / "model" / "preprocessor_config.json").read_text())
    pre["max_pixels"] = value
    (here / "model" / "preprocessor_config.json").write_text(json.dumps(pre))
    res = run_cli("plan", "good", "model", "--gpu-memory", "24GiB", "--json")
    if value is None:  # absent: the processor default, as vLLM does
        assert res.code in (0, 1)
        return
    assert res.code == 2 and "preprocessor_config.json: max_pixels" in res.err


@pytest.mark.parametrize("size", ["8", "0GiB", "-8GiB", "8 parsecs", "\u0668GiB"])
def test_gpu_memory_needs_a_unit_and_a_sane_value(here: Path, size: str) -> None:
    res = run_cli("plan", "good", "model", "--gpu-memory", size)
    assert res.code == 2
    assert "--gpu-memory" in res.err


def test_gpu_memory_units() -> None:
    from envkit.gpu.cards import parse_size

    assert parse_size("8GiB") == 8 * 1024**3
    assert parse_size("7.5G") == 7_500_000_000
    assert parse_size("512MiB") == 512 * 1024**2


def test_an_unreachable_pytorch_index_names_torch_index_default() -> None:
    output = (
        "error: Failed to fetch: `https://torch.example/whl/cu124/torch/`\n"
        "  cause: error sending request for url (https://torch.example/whl/cu124/torch/)\n"
        "  cause: dns error\n"
        "  cause: failed to lookup address information: Name or service not known\n"
    )
    found = network_failure(output, ["pip", "compile", "--torch-backend", "cu124"])
    assert found is not None and found.exit_code == 2
    assert "Cannot reach https://torch.example/whl/cu124/torch/" in found.message
    assert "--torch-index default" in found.hint
    assert network_failure("No solution found when resolving dependencies", []) is None
