"""A real venv fingerprinted, and `envkit fleet check --ray` on a local three-node Ray cluster
(``ray.cluster_utils.Cluster`` on 127.0.0.1): each node sees its own fake nvidia-smi through
the ``env_vars`` of its raylet, one node another GPU and driver, which must be the one flagged;
a node whose task does not end in time is not answering, never passing."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import fleetnodes as fn
from conftest import Indexes
from helpers import PY, envkit, lock_args, matrix_profile, output, run_cli


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, indexes: Indexes) -> Path:
    """A tiny profile ``m`` locked and built from its lock into ``.venv`` (tiny wheels)."""
    root = tmp_path_factory.mktemp("fleet")
    (root / "envs").mkdir()
    (root / "envs" / "m.toml").write_text(matrix_profile([PY]))
    envkit("lock", "m", *lock_args(indexes), cwd=root).assert_ok()
    build = ["--index-url", indexes.default, "--python", sys.executable]  # from the lock
    envkit("build", "m", *build, cwd=root).assert_ok()
    fn.fake_smi(root / "smi-a100", fn.A100)
    fn.fake_smi(root / "smi-p100", fn.P100)
    return root


def _with_gpu(root: Path, kind: str) -> dict[str, str]:
    return {"PATH": f"{root / kind}{os.pathsep}{os.environ['PATH']}"}


def test_a_real_venv_fingerprint_matches_its_lock(project: Path) -> None:
    env = {**_with_gpu(project, "smi-a100"), "VLLM_API_KEY": "sk-" + "x" * 20, "NCCL_DEBUG": "INFO"}
    res = envkit("fingerprint", "--venv", ".venv", "--json", cwd=project, env=env)
    res.assert_ok()
    found = output("fingerprint", res.out)["fingerprint"]
    assert "x" * 20 not in res.out
    assert found["variables"]["VLLM_API_KEY"] == "***"
    assert found["variables"]["NCCL_DEBUG"] == "INFO"
    assert found["gpus"][0]["compute_capability"] == "8.0" and found["driver"] == "550.54.15"
    dists = {d["name"]: d for d in found["distributions"]}
    assert dists["vllm"]["version"] == "0.8.5" and dists["vllm"]["files"] == "intact"
    (project / "node.json").write_text(res.out)
    check = envkit("fleet", "check", "m", "node.json", "--venv", ".venv", "--json", cwd=project)
    data = output("fleet-check", check.out)
    assert check.code == 0, check.out
    assert data["nodes"][0]["cell"] == f"py{PY}-linux-x86_64-cu124"


def test_a_file_changed_in_the_venv_is_named(project: Path, tmp_path: Path) -> None:
    copy = tmp_path / "venv"
    shutil.copytree(project / ".venv", copy, symlinks=True)
    changed = next(copy.glob("lib/python*/site-packages/transformers/__init__.py"))
    changed.write_text(changed.read_text() + "# edited\n")
    env = _with_gpu(project, "smi-a100")
    res = envkit("fingerprint", "--venv", str(copy), "--json", cwd=project, env=env)
    dists = {d["name"]: d for d in res.json()["fingerprint"]["distributions"]}
    assert dists["transformers"]["files"] == "modified"
    assert dists["transformers"]["modified"] == ["transformers/__init__.py"]
    (tmp_path / "node.json").write_text(res.out)
    check = envkit("fleet", "check", "m", str(tmp_path / "node.json"), "--json", cwd=project)
    assert check.code == 1
    files = next(c for c in check.json()["nodes"][0]["checks"] if c["check"] == "files")
    assert files["status"] == "differs" and "transformers" in files["detail"]


def test_a_missing_venv_is_bad_input(project: Path) -> None:
    res = envkit("fingerprint", "--venv", "nowhere", "--json", cwd=project)
    assert res.code == 2 and "no virtual environment at nowhere" in res.json()["message"]


def cluster_test(test: Callable[..., None]) -> Callable[..., None]:
    """A test on the local cluster: its marker, skipped without Ray (found, not imported:
    Ray reads RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER once, when first imported)."""
    marks = [
        pytest.mark.cluster,
        pytest.mark.skipif(
            importlib.util.find_spec("ray") is None,
            reason="Ray is not installed: pip install 'envkit[ray]'",
        ),
        pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    ]
    for mark in marks:
        test = mark(test)
    return test


@pytest.fixture(scope="module")
def cluster(project: Path) -> Iterator[Any]:
    """Three nodes on 127.0.0.1: node-a and node-b with an A100, node-c with a P100 on an
    old driver; node-c's workers also import a sitecustomize that hangs while a flag exists."""
    saved = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    # before Ray is first imported: every address stays 127.0.0.1 (Ray otherwise turns a
    # loopback address into this machine's outward one)
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "120")  # the GCS's side of it
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    assert not ray_constants.ENABLE_RAY_CLUSTER, "Ray was imported before the fixture"
    hang = project / "hang"
    hang.mkdir(exist_ok=True)
    (hang / "sitecustomize.py").write_text(
        f"import os, time\nif os.path.exists({str(project / 'hang.flag')!r}):\n    time.sleep(60)\n"
    )
    common: dict[str, Any] = {
        "num_cpus": 1,
        "node_ip_address": "127.0.0.1",
        "include_dashboard": False,
    }
    gpu_c = {**_with_gpu(project, "smi-p100"), "PYTHONPATH": str(hang)}
    made = Cluster()
    _add(made, **common, node_name="node-a", env_vars=_with_gpu(project, "smi-a100"))
    _add(made, **common, node_name="node-b", env_vars=_with_gpu(project, "smi-a100"))
    _add(made, **common, node_name="node-c", env_vars=gpu_c)
    made.wait_for_nodes()
    try:
        yield made
    finally:
        made.shutdown()  # type: ignore[no-untyped-call,unused-ignore]
        if saved is None:
            os.environ.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
        else:
            os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = saved


def _add(made: Any, **node: Any) -> None:
    """A node added, again if it did not register within Ray's 30 s (a loaded machine)."""
    for attempt in range(4):
        try:
            made.add_node(**node)
            return
        except Exception:
            if attempt == 3:
                raise


@cluster_test
def test_the_node_with_another_gpu_and_driver_is_flagged(project: Path, cluster: Any) -> None:
    assert cluster.address.startswith("127.0.0.1:")
    res = envkit(
        "fleet", "check", "m", "--ray", cluster.address, "--venv", str(project / ".venv"),
        "--json", cwd=project,
    )  # fmt: skip
    data = output("fleet-check", res.out)
    assert res.code == 1, res.out
    assert sorted(v["node"] for v in data["nodes"]) == ["node-a", "node-b", "node-c"]
    assert data["differ"] == ["node-c"] and data["not_answering"] == []
    node_c = next(v for v in data["nodes"] if v["node"] == "node-c")
    status = {c["check"]: c["status"] for c in node_c["checks"]}
    assert status["kernels"] == "differs" and status["driver"] == "differs"
    assert status["packages"] == "ok" and status["python"] == "ok"
    assert node_c["fingerprint"]["gpus"][0]["name"] == fn.P100[0]
    text = run_cli("fleet", "check", "m", "--ray", cluster.address, "--venv",
                   str(project / ".venv"), "--envs", str(project / "envs"))  # fmt: skip
    assert text.code == 1 and "node-c: driver:" in text.out and "node-a: " not in text.out


@cluster_test
def test_a_node_that_does_not_answer_is_never_a_pass(project: Path, cluster: Any) -> None:
    flag = project / "hang.flag"
    flag.write_text("")
    try:
        res = envkit(
            "fleet", "check", "m", "--ray", cluster.address, "--venv", str(project / ".venv"),
            "--timeout", "8", "--json", cwd=project,
        )  # fmt: skip
    finally:
        flag.unlink()
    data = output("fleet-check", res.out)
    assert res.code in (1, 2), res.out
    assert "node-c" in data["not_answering"]
    node_c = next(v for v in data["nodes"] if v["node"] == "node-c")
    assert node_c["ok"] is False and "did not answer within 8 s" in node_c["problem"]
    assert json.dumps(node_c).count('"differs"') == 0
