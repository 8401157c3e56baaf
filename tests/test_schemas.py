"""The JSON Schemas that ship with envkit (src/envkit/schemas) hold for what envkit reads and
writes: the shipped profiles, every lock.json and index.json, and each command's --json."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jsonschema
import loopback
import pytest
import tomlkit

import indexserver
from conftest import Indexes
from helpers import (
    build_args,
    envkit,
    lock_args,
    matrix_profile,
    output,
    results_in,
    run_cli,
    schema,
)

ROOT = Path(__file__).resolve().parent.parent
MODEL = Path(__file__).parent / "fixtures" / "models" / "Qwen2-VL-2B-Instruct"
SHIPPED = "vllm-0.8.5+qwen2-vl"


def test_every_shipped_schema_holds_against_its_metaschema() -> None:
    """Once a run (helpers.schema only reads the files): each names draft 2020-12, the
    dialect the tests validate with, and is a valid schema of it."""
    shipped = sorted(resources.files("envkit").joinpath("schemas").iterdir(), key=str)
    names = [p.name.removesuffix(".schema.json") for p in shipped if p.name.endswith(".json")]
    assert {"index", "lock", "outputs", "profile"} <= set(names)
    for name in names:
        data = schema(name)
        assert data["$schema"] == jsonschema.Draft202012Validator.META_SCHEMA["$id"], name
        jsonschema.Draft202012Validator.check_schema(data)


def test_shipped_profiles_locks_and_index_follow_their_schemas() -> None:
    profiles = sorted((ROOT / "envs").glob("*.toml"))
    assert profiles
    for path in profiles:
        jsonschema.validate(tomlkit.parse(path.read_text()).unwrap(), schema("profile"))
        assert path.read_text().startswith("#:schema "), path  # editors find the schema
    for path in sorted((ROOT / "constraints").glob("*/lock.json")):
        jsonschema.validate(json.loads(path.read_text()), schema("lock"))
    jsonschema.validate(json.loads((ROOT / "constraints/index.json").read_text()), schema("index"))


def test_the_profile_schema_refuses_what_envkit_refuses() -> None:
    bad = {"python": "3.12", "requirements": ["vllm"], "torch": {"backend": "cu\u0661\u0662\u0664"}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema("profile"))
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"python": "3.12", "requirements": [], "typo": 1}, schema("profile"))


def test_model_and_profile_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    output("profiles", run_cli("profiles", "--json").out)
    output("show", run_cli("show", SHIPPED, "--json").out)
    output("check-model", run_cli("check-model", SHIPPED, str(MODEL), "--json").out)
    output("which", run_cli("which", str(MODEL), "--json").out)
    output("plan", run_cli("plan", SHIPPED, str(MODEL), "--gpu-memory", "8GiB", "--json").out)
    # every check's result is the one $defs/result (results_in validates each it finds)
    small = output(
        "plan", run_cli("plan", SHIPPED, str(MODEL), "--gpu-memory", "1GiB", "--json").out
    )
    assert {r["severity"] for r in results_in(small["problems"])} == {"error"}
    doctor = output("doctor", run_cli("doctor", "--json").out)
    assert len(results_in(doctor["findings"])) == len(doctor["findings"]) >= 1
    (tmp_path / "boot.log").write_text(
        "INFO 05-12 10:01:01 [api_server.py:1043] vLLM API server version 0.8.5\n"
        "RuntimeError: UVA is not available\n"
    )
    explained = output("explain", run_cli("explain", "boot.log", "--json").out)
    assert results_in(explained["cause"])[0]["code"] == "uva-unavailable"
    output("explain-diff", run_cli("explain", "--diff", "boot.log", "boot.log", "--json").out)
    for failing in (
        ("show", "nope"),
        ("lock", "--jobs", "0"),
        ("plan", SHIPPED, str(MODEL), "--gpu-memory", "8"),
    ):
        data = output("error", run_cli(*failing, "--json").out)
        assert data["exit_code"] == 2
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "broken.toml").write_text('python = "3.12"\nrequirements = 5\n')
    broken = output("error", run_cli("--envs", "envs", "show", "broken", "--json").out)
    assert [r["code"] for r in results_in(broken["problems"])] == ["profile-invalid"]


def test_lock_outputs(tmp_path: Path, indexes: Indexes, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "m.toml").write_text(matrix_profile(["3.11"]))
    monkeypatch.chdir(tmp_path)
    output("lock", run_cli("lock", "m", *lock_args(indexes), "--json").out)
    output("lock-check", run_cli("lock", "m", "--check", "--json").out)
    output("matrix", run_cli("matrix", "--json").out)
    output("publish", run_cli("publish", "--all", "--json").out)
    jsonschema.validate(
        json.loads((tmp_path / "constraints/m/lock.json").read_text()), schema("lock")
    )
    jsonschema.validate(
        json.loads((tmp_path / "constraints/index.json").read_text()), schema("index")
    )


def test_environment_outputs(built_copy: Path, indexes: Indexes) -> None:
    verified = output("verify", envkit("verify", "good", "--json", cwd=built_copy).out)
    assert len(results_in(verified["checks"])) == len(verified["checks"]) >= 6
    res = envkit("build", "good", "--json", *build_args(indexes.default), cwd=built_copy)
    res.assert_ok()
    output("build", res.out)


def test_scan_history_and_probe_outputs(world: indexserver.Server, scan_cache: Path) -> None:
    output(
        "history",
        run_cli("history", "LlamaForCausalLM", "--json", "--index-url", indexserver.url(world)).out,
    )
    output(
        "scan",
        run_cli(
            "scan", "transformers==4.51.3", "--json", "--index-url", indexserver.url(world)
        ).out,
    )
    routes = {
        "/v1/models": lambda h: h.send(200, b'{"data": [{"id": "m"}]}'),
        "/v1/chat/completions": lambda h: h.send(
            200, b'{"choices": [{"message": {"content": "OK"}}]}'
        ),
    }
    with loopback.serve(routes) as server:
        output("probe", run_cli("probe", loopback.origin(server) + "/v1", "--json").out)


def test_new_profile_output(tmp_path: Path, world: indexserver.Server, scan_cache: Path) -> None:
    qwen35 = Path(__file__).parent / "fixtures" / "models" / "Qwen3.5-9B"
    res = run_cli(
        "--envs", str(tmp_path / "envs"), "new-profile", "q", "--for-model", str(qwen35),
        "--index-url", indexserver.url(world), "--json",
    )  # fmt: skip
    res.assert_ok()
    output("new-profile", res.out)
