"""Model configs from the Hugging Face Hub through huggingface_hub: the token stays with the
Hub's origin and out of every output, the cache answers offline, --revision is honoured, and
each failure is one message. Each run is a process of its own: the Hub's client reads its
environment (HF_ENDPOINT, HF_HOME, HF_HUB_OFFLINE) when it is imported. The processes are
forked from a zygote that has imported envkit and the client's dependencies but never the
client itself (tests/forked.py), so each run imports huggingface_hub under its own
environment, as a fresh ``python -m envkit`` would."""

from __future__ import annotations

import json
from pathlib import Path

import loopback
import pytest
from forked import envkit_forked

from helpers import FIXTURES

CONFIG = (FIXTURES / "models/Qwen2-VL-2B-Instruct/config.json").read_bytes()
TOKEN = "hf_hubTESTtoken0123456789"
COMMIT = "a" * 40


def hub_file(body: bytes, commit: str = COMMIT) -> loopback.Route:
    """What the Hub answers for a small file: its bytes, ETag and the repo's commit."""

    def route(handler: loopback.Handler) -> None:
        handler.send(200, body, "application/json", {"ETag": '"cfg-etag"', "X-Repo-Commit": commit})

    return route


@pytest.fixture
def hf_env(tmp_path: Path) -> dict[str, str]:
    return {"HF_HOME": str(tmp_path / "hf"), "HF_TOKEN": TOKEN, "HF_HUB_DISABLE_TELEMETRY": "1"}


def check(project: Path, env: dict[str, str], *args: str) -> tuple[int, str, str]:
    res = envkit_forked("check-model", "vllm-0.8.5+qwen2-vl", *args, cwd=project, env=env)
    return res.code, res.out, res.err


def test_a_repo_id_reads_config_json_with_the_token_never_shown(
    project: Path, hf_env: dict[str, str]
) -> None:
    routes = {"/org/model/resolve/main/config.json": hub_file(CONFIG)}
    with loopback.serve(routes) as hub:
        env = {**hf_env, "HF_ENDPOINT": loopback.origin(hub)}
        code, out, err = check(project, env, "org/model", "--json")
    assert code == 0, err
    assert json.loads(out)["model_type"] == "qwen2_vl"
    assert f"Bearer {TOKEN}" in loopback.authorizations(hub)
    assert TOKEN not in out + err
    # the Hub's cache now answers offline, without the Hub
    offline = {**hf_env, "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"}
    code, out, err = check(project, offline, "org/model", "--json")
    assert code == 0, err
    assert json.loads(out)["model_type"] == "qwen2_vl"
    # and when the Hub does not answer, without HF_HUB_OFFLINE: the cache, at once
    unreachable = {**hf_env, "HF_ENDPOINT": "http://127.0.0.1:9"}
    code, out, err = check(project, unreachable, "org/model", "--json")
    assert code == 0, err
    assert "Retrying" not in err


def test_revision_is_asked_for(project: Path, hf_env: dict[str, str]) -> None:
    routes = {"/org/model/resolve/v1.0/config.json": hub_file(CONFIG, "b" * 40)}
    with loopback.serve(routes) as hub:
        env = {**hf_env, "HF_ENDPOINT": loopback.origin(hub)}
        code, out, err = check(project, env, "org/model", "--revision", "v1.0", "--json")
    assert code == 0, err
    assert json.loads(out)["model"] == "hub:org/model@v1.0"


def test_the_token_does_not_follow_a_redirect_to_another_origin(
    project: Path, hf_env: dict[str, str]
) -> None:
    with loopback.serve({"/blob/config.json": hub_file(CONFIG)}) as cdn:

        def moved(handler: loopback.Handler) -> None:
            handler.send(
                302,
                b"",
                headers={
                    "Location": f"{loopback.origin(cdn)}/blob/config.json",
                    "X-Repo-Commit": COMMIT,
                    "X-Linked-Etag": '"cfg-etag"',
                    "X-Linked-Size": str(len(CONFIG)),
                },
            )

        with loopback.serve({"/org/model/resolve/main/config.json": moved}) as hub:
            env = {**hf_env, "HF_ENDPOINT": loopback.origin(hub)}
            code, out, err = check(project, env, "org/model", "--json")
    assert code == 0, err
    assert loopback.authorizations(hub) and set(loopback.authorizations(hub)) == {f"Bearer {TOKEN}"}
    assert loopback.authorizations(cdn) and set(loopback.authorizations(cdn)) == {""}
    assert TOKEN not in out + err


def test_hub_failures_are_one_message(project: Path, hf_env: dict[str, str]) -> None:
    def gated(handler: loopback.Handler) -> None:
        handler.send(401, b'{"error": "gated"}', headers={"X-Error-Code": "GatedRepo"})

    routes = {
        "/org/gated/resolve/main/config.json": gated,
        "/org/big/resolve/main/config.json": lambda h: h.send(
            200,
            b"{}",
            headers={"ETag": '"e"', "X-Repo-Commit": COMMIT, "X-Linked-Size": "999999999"},
        ),
    }
    with loopback.serve(routes) as hub:
        env = {**hf_env, "HF_ENDPOINT": loopback.origin(hub)}
        for repo, expected in (("org/gated", "HF_TOKEN"), ("org/big", "envkit reads at most")):
            code, out, err = check(project, env, repo)
            assert code == 2, (repo, err)
            assert expected in err and "Traceback" not in err and TOKEN not in out + err
    code, _out, err = check(project, {**hf_env, "HF_ENDPOINT": "http://127.0.0.1:9"}, "org/x")
    assert (code == 2 and "Hugging Face cache" in err) or "Cannot fetch" in err
