"""A site-packages laid out as real ones are, from g++-built stubs given fatbins: torch's
libraries, vLLM's core and backend modules, a top-level flash-attn module built for another
CUDA runtime, NVIDIA's runtime library (the GPU layer's tests read it)."""

from __future__ import annotations

import shutil
from functools import cache
from pathlib import Path

import elfbuild
import fatbins
from fatbins import ARCH, PTX, SASS, E

FLASH = "flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so"


@cache
def site_template() -> Path:
    """One site-packages per process, copied by each test that changes it."""
    built = elfbuild.built()
    site = built.root / "site-packages"
    lib = site / "torch" / "lib"
    lib.mkdir(parents=True)
    shutil.copy(built.libc10, lib)
    shutil.copy(built.libtorch_cpu, lib)
    torch_kernels = fatbins.container(*fatbins.sass(70, 75, 80, 86, 90))
    fatbins.with_fatbin(built.plain, torch_kernels * 3, lib / "libtorch_cuda.so")
    (site / "torch" / "version.py").write_text("cuda: Optional[str] = '12.4'\n")
    runtime = site / "nvidia" / "cuda_runtime" / "lib"
    runtime.mkdir(parents=True)
    shutil.copy(built.cudart12, runtime)
    vllm = site / "vllm"
    (vllm / "vllm_flash_attn").mkdir(parents=True)
    (vllm / "__init__.py").write_text("")
    core = fatbins.section(
        *[fatbins.container(*fatbins.sass(70, 75, 80, 86, 89, 90))] * 3,
        fatbins.container(E(SASS, 90, ARCH)),
        fatbins.container(E(SASS, 52), E(PTX, 52)),
    )
    fatbins.with_fatbin(built.ext_c10, core, vllm / "_C.abi3.so")
    backend = fatbins.container(*fatbins.sass(80, 90))
    fatbins.with_fatbin(built.ext_c10, backend, vllm / "vllm_flash_attn" / "_vllm_fa2_C.abi3.so")
    shutil.copy(built.ext_stable, site / FLASH)  # links libcudart.so.13: not in this site
    (site / "flash_attn").mkdir()
    shutil.copy(built.ext_stable, site / "flash_attn" / "ops.so")
    record = site / "flash_attn-2.8.3.dist-info" / "RECORD"
    record.parent.mkdir()
    record.write_text(f"flash_attn/__init__.py,,\n{FLASH},,\n")
    return site
