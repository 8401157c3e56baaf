"""Real wheels' torch symbols against a real torch, read by range from the default index
(gpu.wheelabi). Run with ``python -m pytest -m network``; the first run fetches about 800 MB
of torch 2.6.0's libraries by range."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.gpu.published import wheelabi
from envkit.io.http import Http

pytestmark = pytest.mark.network
FILES = "https://files.pythonhosted.org/packages"
TORCH = (
    f"{FILES}/e5/35/0c52d708144c2deb595cd22819a609f78fdd699b95ff6f0ebcd456e3c7c1/"
    "torch-2.6.0-cp312-cp312-manylinux1_x86_64.whl",
    "2bb8987f3bb1ef2675897034402373ddfc8f5ef0e156e2d8cfc47cacafdda4a9",
)
# built for torch 2.5.1 (its metadata pins torch==2.5.1)
XFORMERS = (
    f"{FILES}/01/ba/048171c15dfd4f9bff63aaf6e93586ea1ea3e14cc66cd2cea59a50fc2047/"
    "xformers-0.0.28.post3-cp312-cp312-manylinux_2_28_x86_64.whl",
    "c550f72bb4e55b67bd847e9272b7f41d27ac82b6b99f35a710a1292f2f218a3a",
)


def test_xformers_for_torch_2_5_does_not_link_against_torch_2_6(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVKIT_CACHE_DIR", str(tmp_path))
    http = Http()
    url, sha = XFORMERS
    needs = wheelabi.wheel_needs(url, url.rsplit("/", 1)[1], sha, http)
    assert needs.requires_torch and needs.torch_spec == "==2.5.1"
    (module,) = [m for m in needs.modules if m.needs_torch]
    assert module.member == "xformers/_C.so" and module.links_torch
    wanted = frozenset(module.symbols)
    torch_url, torch_sha = TORCH
    defined = wheelabi.torch_defines(
        torch_url, torch_url.rsplit("/", 1)[1], torch_sha, wanted, http
    )
    missing = {wheelabi.readable(s) for s in wanted - defined}
    assert missing == {
        "at::TensorIteratorBase::TensorIteratorBase(...)",
        "torch::autograd::VariableInfo::VariableInfo(...)",
    }
    assert len(defined) == len(wanted) - 2
