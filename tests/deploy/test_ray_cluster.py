"""The Ray runtime_env envkit export writes, run for real: a local Ray cluster on 127.0.0.1
starts a task in it, and the task reports the lock's versions (the tiny test wheels of
tests/wheelhouse.py, installed by Ray's uv from the lock with its hashes)."""

from __future__ import annotations

import os

# before Ray is imported: Ray reads it once, and then binds its cluster to 127.0.0.1
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

import hashlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from lintindex import lint_index, lint_reads_the_local_index  # noqa: F401 (fixtures)

from envkit.deploy.export import Engine, ExportOptions, export, facts_for
from envkit.deploy.facts import ray_wait
from envkit.image.spec import spec_for
from envkit.profiles.catalog import Catalog

from conftest import Indexes
from helpers import envkit

CELL = "py3.11-linux-x86_64-cu124"
PROFILE = """description = "ray export test"
python = ">=3.10"
requirements = ["vllm==0.8.5"]
constraints = ["transformers==4.51.3"]

[torch]
backend = "cu124"

[matrix]
python = ["3.11"]
platforms = ["linux-x86_64"]
backends = ["cu124"]
"""

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(
        importlib.util.find_spec("ray") is None or importlib.util.find_spec("virtualenv") is None,
        reason="Ray (and virtualenv, which its uv runtime_env needs) is not installed: "
        "uv pip install ray==2.60.0 virtualenv",
    ),
]


def test_a_task_in_the_exported_runtime_env_reports_the_locks_versions(
    tmp_path: Path, indexes: Indexes, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "tiny.toml").write_text(PROFILE)
    envkit(
        "lock", "tiny", "--index-url", indexes.default, "--torch-index", "default", cwd=tmp_path
    ).assert_ok()
    monkeypatch.chdir(tmp_path)
    profile = Catalog.from_option(str(tmp_path / "envs")).resolve("tiny")
    spec = spec_for(profile, CELL, index=indexes.default)
    options = ExportOptions(engine=Engine.RAY, out=tmp_path / "out")
    facts = facts_for(spec, "org/tiny-model", ["--max-model-len", "4096"], options)
    result = export(profile, facts, options)
    written = result.files[0].path
    runtime_env = yaml.safe_load(written.read_text())
    lock = tmp_path / "constraints" / "tiny" / f"{CELL}.txt"
    assert (
        runtime_env["env_vars"]["ENVKIT_LOCK_SHA256"]
        == hashlib.sha256(lock.read_bytes()).hexdigest()
    )
    assert all("--hash=sha256:" in p for p in runtime_env["uv"]["packages"])

    import ray
    from ray.cluster_utils import Cluster

    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False},
    )
    assert cluster.address.startswith("127.0.0.1:"), cluster.address
    try:
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)

        @ray.remote(runtime_env=runtime_env)  # type: ignore[untyped-decorator,unused-ignore]
        def versions() -> dict[str, str]:
            from importlib.metadata import version

            names = ("vllm", "transformers", "torch")
            return {n: version(n) for n in names} | {"cell": os.environ["ENVKIT_CELL"]}

        got = ray.get(versions.remote(), timeout=600)
        # the wait the multi-node files run before vllm serve: the cluster is whole
        waited = subprocess.run(
            [sys.executable, *ray_wait(1)[1:]], capture_output=True, text=True, timeout=300,
            env={**os.environ, "RAY_ADDRESS": cluster.address},
        )  # fmt: skip
        assert waited.returncode == 0, waited.stderr[-2000:]
    finally:
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call,unused-ignore]
    assert got == {"vllm": "0.8.5", "transformers": "4.51.3", "torch": "2.6.0", "cell": CELL}
