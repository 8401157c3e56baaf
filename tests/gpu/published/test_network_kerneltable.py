"""The shipped kernel table against a fresh read of the package index: vLLM 0.8.5's default
wheel and torch 2.6.0's, read by range (about 0.9 GB fetched, nothing installed). Run with
``python -m pytest -m network tests/gpu/published/test_network_kerneltable.py``."""

from __future__ import annotations

import pytest
from packaging.version import Version

from envkit.gpu.arch import Capability
from envkit.gpu.published import kerneltable
from envkit.gpu.published.kerneltable import Verdict
from envkit.gpu.published.wheelkernels import WheelKernels, read_wheel
from envkit.index.pages import pick_linux_wheel
from envkit.index.session import IndexSession
from envkit.io.http import Http
from envkit.io.urls import DEFAULT_INDEX

pytestmark = pytest.mark.network

MAIN_085 = "sm_70, sm_75, sm_80, sm_86, sm_89, sm_90"


def fresh(project: str, version: str) -> WheelKernels:
    http = Http(budget=3600.0)
    session = IndexSession(DEFAULT_INDEX, http=http)
    wheel = pick_linux_wheel(session.wheels(project, Version(version)), Version(version))
    assert wheel is not None
    return read_wheel(wheel, project, http, use_cache=False)


def test_vllm_085_as_shipped() -> None:
    shipped = kerneltable.vllm_build("0.8.5")
    assert shipped is not None
    read = fresh("vllm", "0.8.5")
    assert read == shipped.wheel  # the same wheel, sha256 and modules
    assert shipped.targets() == MAIN_085 and shipped.torch == "2.6.0"
    core = {m.member: m for m in read.core}
    assert set(core) == {"vllm/_C.abi3.so", "vllm/_moe_C.abi3.so"}
    c = core["vllm/_C.abi3.so"]
    assert c.images is not None and c.images.containers == 56
    assert "libcudart.so.12" in c.needed and shipped.cuda_major == 12
    assert {m.member for m in read.optional} >= {"vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so"}


def test_torch_260_as_shipped() -> None:
    shipped = kerneltable.torch_build("2.6.0")
    assert shipped is not None and shipped.default
    read = fresh("torch", "2.6.0")
    assert read == shipped.wheel and read.torch_cuda == "12.4"
    assert shipped.targets() == "sm_50, sm_60, sm_70, sm_75, sm_80, sm_86, sm_90"
    lib = next(m for m in read.core if m.member == "torch/lib/libtorch_cuda.so")
    assert {"libcudart.so.12", "libcublas.so.12", "libcudnn.so.9"} <= set(lib.needed)
    verdict = kerneltable.vllm_release_verdict("0.8.5", Capability(12, 0))
    assert verdict.verdict is Verdict.NO_KERNEL_IMAGE and verdict.torch.verdict is (
        Verdict.NO_KERNEL_IMAGE
    )
