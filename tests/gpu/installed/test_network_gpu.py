"""The GPU layer against real wheels from the package index: vLLM 0.8.5's _C.abi3.so (its
fatbins), vLLM 0.33.0's _C_stable_libtorch.abi3.so (its stable-ABI needs) and torch 2.6.0's
libtorch_cuda.so (its arch list). Run with ``python -m pytest -m network tests/gpu``; it
downloads about 1.2 GB."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable
from pathlib import Path

import pytest

from envkit.gpu.arch import Capability, Target
from envkit.gpu.binaries import cudalibs, dynsym, elf, fatbin, images
from envkit.gpu.binaries.images import Verdict
from envkit.gpu.binaries.torchabi import is_torch_symbol

pytestmark = pytest.mark.network


def member(tmp: pytest.TempPathFactory, requirement: str, name: str) -> Path:
    """One member of a published wheel, written to disk (the wheel downloaded with pip)."""
    folder = tmp.mktemp(requirement.replace("=", "-"))
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "-q", requirement, "-d", folder],
        check=True,
    )
    (wheel,) = folder.glob("*.whl")
    out = folder / Path(name).name
    with zipfile.ZipFile(wheel) as archive, archive.open(name) as src, out.open("wb") as dst:
        shutil.copyfileobj(src, dst, 1024 * 1024)
    wheel.unlink()
    return out


def sms(targets: Iterable[Target]) -> list[str]:
    return sorted(str(t) for t in targets)


def read_images(path: Path) -> images.Images:
    found = fatbin.read(path)
    assert isinstance(found, fatbin.Fatbin), found
    return images.images(found)


def test_vllm_085_kernels(tmp_path_factory: pytest.TempPathFactory) -> None:
    """vLLM 0.8.5's _C: SASS for sm_70, 75, 80, 86, 89 and 90 in its main containers (56
    containers in all, some for sm_90a or sm_80..89 alone, one of sm_52 with PTX)."""
    core = member(tmp_path_factory, "vllm==0.8.5", "vllm/_C.abi3.so")
    held = read_images(core)
    assert held.containers == 56
    assert [sms(main) for main in held.main] == [
        ["sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90"]
    ]
    assert {"sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"} <= set(sms(held.sass))
    assert held.on(Capability(8, 6)).verdict is Verdict.RUNS_PARTLY
    assert held.on(Capability(12, 0)).verdict is Verdict.NO_KERNEL_IMAGE
    assert [str(c) for c in held.runs_on()] == [
        "7.0",
        "7.2",
        "7.5",
        "8.0",
        "8.6",
        "8.7",
        "8.9",
        "9.0",
    ]
    links = elf.links(core)
    assert isinstance(links, elf.Links) and "libcudart.so.12" in links.needed


def test_vllm_033_stable_abi_needs(tmp_path_factory: pytest.TempPathFactory) -> None:
    """vLLM 0.33.0's _C_stable_libtorch needs 88 torch symbols, every one of the stable C ABI
    (69 aoti_torch_*, 19 torch_*) and none of C++; it is built for CUDA 13."""
    stable = member(tmp_path_factory, "vllm==0.33.0", "vllm/_C_stable_libtorch.abi3.so")
    undefined = dynsym.undefined(stable)
    assert isinstance(undefined, frozenset)
    torch = sorted(filter(is_torch_symbol, undefined))
    assert len(torch) == 88
    assert sum(s.startswith("aoti_torch_") for s in torch) == 69
    assert sum(s.startswith("torch_") for s in torch) == 19
    links = elf.links(stable)
    assert isinstance(links, elf.Links)
    assert {"libtorch.so", "libtorch_cpu.so", "libcudart.so.13", "libcuda.so.1"} <= set(
        links.needed
    )
    held = read_images(stable)
    assert [str(c) for c in held.runs_on()] == [
        "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "12.0", "12.1",
    ]  # fmt: skip


def test_torch_260_arch_list(tmp_path_factory: pytest.TempPathFactory) -> None:
    """torch 2.6.0 (CUDA 12.4, the default index's build): SASS for sm_50 to sm_90, no PTX,
    so no kernel image on Blackwell; its CUDA 12 libraries by soname."""
    cuda = member(tmp_path_factory, "torch==2.6.0", "torch/lib/libtorch_cuda.so")
    held = read_images(cuda)
    assert sms(held.main[0]) == ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
    assert held.ptx == ()
    assert held.on(Capability(12, 0)).verdict is Verdict.NO_KERNEL_IMAGE
    assert held.runs_on()[0] == Capability(5, 0) and held.runs_on()[-1] == Capability(9, 0)
    links = elf.links(cuda)
    assert isinstance(links, elf.Links)
    needed = {lib.soname: lib for n in links.needed if (lib := cudalibs.classify(n))}
    assert {"libcudart.so.12", "libcublas.so.12", "libcudnn.so.9", "libnccl.so.2"} <= set(needed)
