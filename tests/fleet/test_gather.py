"""This node's facts as `envkit fingerprint` gathers them: the variables NCCL and vLLM read
(secret-looking values masked before encoding), the devices and /dev/shm, and --ray without
Ray installed (one paragraph, exit 2)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from envkit.fleet import gather

import fleetnodes as fn
from helpers import envkit_process, output, run_cli


def test_only_vllm_and_nccl_variables_are_kept_and_secrets_masked() -> None:
    env = {
        "NCCL_IB_HCA": "mlx5_0",
        "VLLM_API_KEY": "short",
        "VLLM_HOST_IP": "10.0.0.1",
        "VLLM_LOGGING_CONFIG_PATH": "https://user:pw@example.invalid/log.json",
        "NCCL_TOKEN": "abc",
        "HF_TOKEN": "hf_" + "a" * 30,
        "PATH": "/usr/bin",
    }
    found = gather.variables(env)
    assert found == {
        "NCCL_IB_HCA": "mlx5_0",
        "NCCL_TOKEN": "***",
        "VLLM_API_KEY": "***",
        "VLLM_HOST_IP": "10.0.0.1",
        "VLLM_LOGGING_CONFIG_PATH": "***",  # a URL with credentials is a secret
    }


@given(st.text(min_size=1, max_size=40), st.text(max_size=200))
def test_a_secret_shaped_value_never_survives(name: str, value: str) -> None:
    secret = "sk-" + "Z9" * 12
    found = gather.variables({f"VLLM_{name}": f"{value} {secret}", f"NCCL_{name}_KEY": value})
    assert all(secret not in v for v in found.values())


def test_devices_and_shm(tmp_path: Path) -> None:
    ib = tmp_path / "infiniband"
    ib.mkdir()
    (ib / "mlx5_1").mkdir()
    (ib / "mlx5_0").mkdir()
    assert gather.devices((ib, tmp_path / "none")) == (str(ib / "mlx5_0"), str(ib / "mlx5_1"))
    size = gather.shm_size(tmp_path)
    assert size is not None and size > 0
    assert gather.shm_size(tmp_path / "none") is None


def test_fingerprint_of_envkits_own_environment() -> None:
    res = run_cli("fingerprint", "--no-hashes", "--json")
    found = output("fingerprint", res.out)["fingerprint"]
    names = {d["name"] for d in found["distributions"]}
    assert {"click", "packaging"} <= names
    assert {d["files"] for d in found["distributions"]} == {"unchecked"}


def test_ray_missing_is_one_paragraph_and_exit_2(tmp_path: Path) -> None:
    """Ray made unimportable for a real envkit process (a package named ray that fails
    to import, first on its path)."""
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "__init__.py").write_text('raise ImportError("No module named ray")\n')
    res = envkit_process(
        "fleet", "check", fn.SHIPPED, "--ray", "auto", "--json", cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path)},
    )  # fmt: skip
    data = output("error", res.out)
    assert res.code == 2 and "Traceback" not in res.err
    assert "--ray needs Ray" in data["message"] and "envkit[ray]" in data["hint"]
