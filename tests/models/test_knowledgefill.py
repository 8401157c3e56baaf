"""envkit knowledge export from a served world, then check-model, compat and lint answered
from the snapshot alone: the server stopped, an empty cache, the index a closed port. What
the snapshot lacks is exit 2 naming knowledge export, never a verdict; a changed snapshot
is refused; its age is said."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import compat_world
import pytest

import indexserver
import lint_world
from helpers import envkit, output, profile_text

CLOSED = "http://127.0.0.1:9/simple"  # nothing listens: a request would fail at once
STALE = '\n[models]\nvllm = "0.8.0"\ntransformers = "4.50.0"\n'  # rescanned from the pins


@dataclass(frozen=True)
class Exported:
    root: Path  # the project: envs/, model/
    snap: Path
    export: dict[str, Any]  # export's --json
    online: dict[str, dict[str, Any]]  # each command's --json with the index up


def _commands(root: Path) -> dict[str, list[str]]:
    return {
        "compat": ["compat", "vllm==0.8.5", "transformers==4.51.3"],
        "check-model": ["check-model", "p085", str(root / "model")],
        "lint": ["lint", "v0.2.1", "--", "m", "--max-model-len", "8", "--enforce-eagr"],
    }


def _run(root: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return envkit("--envs", str(root / "envs"), *args, cwd=root, env=env)


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Exported]:
    root = tmp_path_factory.mktemp("knowledge")
    (root / "envs").mkdir()
    (root / "envs" / "p085.toml").write_text(profile_text() + STALE)
    (root / "envs" / "v0.2.1.toml").write_text(lint_world.profile("0.2.1"))
    (root / "model").mkdir()
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    (root / "model" / "config.json").write_text(json.dumps(config))
    folder = root / "index"
    folder.mkdir()
    for wheel in [*compat_world.wheels(), *lint_world.wheels()]:
        wheel.write(folder)
    online: dict[str, dict[str, Any]] = {}
    env = {"ENVKIT_CACHE_DIR": str(root / "cache")}  # the export takes what they read from it
    with indexserver.serve(folder) as server:
        uploads = compat_world.UPLOADS  # lint_world's wheels: long before
        releases = {p.name: "-".join(p.name.split("-")[:2]) for p in folder.glob("*.whl")}
        server.upload_times = {
            n: uploads.get(r, "2025-01-01T00:00:00Z") for n, r in releases.items()
        }
        url = indexserver.url(server)
        for name, args in _commands(root).items():
            done = _run(root, args[0], "--json", "--index-url", url, *args[1:], env=env)
            assert done.out, (name, done.err)
            online[name] = done.json()
        res = _run(
            root, "knowledge", "export", str(root / "k.zip"), "--for", "p085", "--for", "v0.2.1",
            "--json", "--index-url", url, env=env,
        )  # fmt: skip
        assert res.code == 0, res.out
        assert "knowledge: compat vllm 0.8.5 x transformers 4.51.3" in res.err  # progress
    yield Exported(root, root / "k.zip", output("knowledge-export", res.out), online)


def _offline(ex: Exported, *args: str, snap: Path | None = None) -> Any:
    """A run from the snapshot with an empty cache and the index a closed port."""
    env = {"ENVKIT_CACHE_DIR": str(ex.root / "cache-offline"), "UV_DEFAULT_INDEX": CLOSED}
    return _run(ex.root, "--knowledge", str(snap or ex.snap), *args, env=env)


def test_the_export_says_what_it_holds(exported: Exported) -> None:
    data = exported.export
    assert data["ok"] is True and data["complete"] is True and data["missing"] == []
    (note,) = data["notes"]  # lint_world's wheels hold serve parsers, no model registry
    assert note.startswith("vllm 0.2.1's registry: the release does not hold it")
    assert data["profiles"] == ["p085", "v0.2.1"]
    assert data["kinds"] == {"bounds": 2, "compat": 1, "scans": 2, "serve-flags": 2, "site": 1}
    snap = data["snapshot"]
    assert snap["pages"] == 2 and snap["age_days"] == 0  # vllm, transformers (no torch page)
    assert snap["made_for"] == ["p085", "v0.2.1"] and len(snap["digest"]) == 64
    assert data["bytes"] == exported.snap.stat().st_size
    with zipfile.ZipFile(exported.snap) as archive:
        names = archive.namelist()
    assert names[:2] == ["manifest.json", "manifest.sha256"]
    assert all(n.startswith(("pages/", "cache/")) for n in names[2:])


@pytest.mark.parametrize("command", ["compat", "check-model", "lint"])
def test_with_the_index_gone_the_snapshot_answers_as_the_index_did(
    exported: Exported, command: str
) -> None:
    args = _commands(exported.root)[command]
    res = _offline(exported, args[0], "--json", *args[1:])
    data = res.json()
    online = exported.online[command]
    if command == "compat":
        assert data["findings"] == online["findings"] == [] and data["ok"] is True
        assert data["reference"] == online["reference"]
    elif command == "check-model":
        assert data["ok"] == online["ok"] is True
        assert data["supported_by"] == online["supported_by"] == ["p085"]
        assert data["notes"] == online["notes"]
        assert any("is stale" in n for n in data["notes"])  # rescanned: from the snapshot
    else:
        assert data["findings"] == online["findings"]
        assert [f["subject"] for f in data["findings"]] == ["--enforce-eagr"]
    assert "knowledge from " in res.err and "made today" in res.err
    assert "uses no network" in res.err


def test_the_same_answer_in_text_and_through_the_variable(exported: Exported) -> None:
    env = {
        "ENVKIT_KNOWLEDGE": str(exported.snap),
        "ENVKIT_CACHE_DIR": str(exported.root / "cache-variable"),
        "UV_DEFAULT_INDEX": CLOSED,
    }
    res = _run(exported.root, "compat", "vllm==0.8.5", "transformers==4.51.3", env=env)
    assert res.code == 0, res.err
    assert "compatible" in res.out and "knowledge from" in res.err


def test_what_it_does_not_hold_is_exit_2_naming_knowledge_export(exported: Exported) -> None:
    res = _offline(exported, "compat", "vllm==0.8.5", "transformers==5.0.0", "--json")
    assert res.code == 2
    data = json.loads(res.out)
    assert data["ok"] is False and data["exit_code"] == 2
    assert "does not hold what envkit reads from vllm-0.8.5-py3-none-any.whl" in data["message"]
    assert "envkit knowledge export FILE --for PROFILE" in data["hint"]
    text = _offline(exported, "lint", "v0.2.1", "--", "m", "--max-model-len", "8")
    assert text.code == 0  # what it holds still answers
    missing = _offline(exported, "compat", "vllm==0.1.0", "transformers==4.51.3")
    assert missing.code == 2 and "knowledge export" in missing.err


def test_a_changed_snapshot_is_refused_before_any_command_runs(
    exported: Exported, tmp_path: Path
) -> None:
    changed = tmp_path / "k.zip"
    with zipfile.ZipFile(exported.snap) as src, zipfile.ZipFile(changed, "w") as out:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.startswith("cache/compat/"):
                data = data.replace(b"[]", b'["forged"]', 1)
            out.writestr(info.filename, data)
    res = _offline(exported, "compat", "vllm==0.8.5", "transformers==4.51.3", snap=changed)
    assert res.code == 2
    assert "changed since it was written (its sha256 differs)" in res.err
    assert "did not use it" in res.err and "compatible" not in res.out
    after = _run(exported.root, "compat", "--knowledge", str(changed), "vllm==0.8.5", "x==1")
    assert after.code == 2 and "did not use it" in after.err  # after the command, too


def test_refresh_does_not_run_with_a_snapshot(exported: Exported) -> None:
    res = _offline(exported, "refresh")
    assert res.code == 2 and "forbids the network" in res.err


def test_names_and_all_are_not_both_given(exported: Exported, tmp_path: Path) -> None:
    res = _run(
        exported.root, "knowledge", "export", str(tmp_path / "x.zip"), "--all", "--for", "p085"
    )
    assert res.code == 2 and "not both" in res.err
    assert not (tmp_path / "x.zip").exists()


def test_a_model_id_is_read_from_the_hubs_cache_alone(exported: Exported) -> None:
    from envkit.io import hub

    res = _offline(exported, "check-model", "p085", "example-org/never-cached")
    assert res.code == 2 and "pass its path" in res.err
    assert hub._offline is False  # the run's alone
