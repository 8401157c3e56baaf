"""vLLM- and torch-shaped wheels whose compiled modules are tiny g++-built shared objects
with ``.nv_fatbin`` sections (elfbuild, fatbins), for reading kernels from a served index."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import elfbuild
import fatbins
import wheelhouse
from fatbins import ARCH, PTX, E

VLLM_TAG = "cp38-abi3-manylinux1_x86_64"
TORCH_TAG = "cp312-cp312-manylinux_2_28_x86_64"
MAIN = (70, 75, 80, 86, 89, 90)  # vLLM 0.8.5's arch list


def blob(*containers: tuple[E, ...]) -> bytes:
    return fatbins.section(*(fatbins.container(*c) for c in containers))


@cache
def modules() -> dict[str, bytes]:
    """The shared objects, built once per process: name -> bytes."""
    built = elfbuild.built()
    out = built.root / "kernels"
    main = fatbins.sass(*MAIN)
    shapes = {
        # 3 main containers and one for sm_90a alone, as vLLM 0.8.5's _C has
        "_C": (built.ext_c10, blob(main, main, main, fatbins.sass(90, flags=ARCH))),
        "_moe_C": (built.ext_c10, blob((*main, E(PTX, 90)))),
        "fa2": (built.ext_c10, blob(fatbins.sass(80, 90))),
        "cuda13": (built.ext_stable, blob(fatbins.sass(75, 80, 86, 90, 100, 120))),
        "torch": (built.ext_c10, blob(fatbins.sass(50, 60, 70, 75, 80, 86, 90))),
        "broken": (built.ext_c10, fatbins.container(E(fatbins.SASS, 80))[:40]),
    }
    found = {
        name: fatbins.with_fatbin(lib, data, out / f"{name}.so").read_bytes()
        for name, (lib, data) in shapes.items()
    }
    found["plain"] = built.plain.read_bytes()
    return found


def vllm(
    folder: Path,
    version: str = "0.8.5",
    files: dict[str, bytes] | None = None,
    *,
    torch: str = "torch==2.6.0",
    tag: str = VLLM_TAG,
) -> Path:
    """A vLLM wheel: by default _C and _moe_C (core), flash-attention and a module without
    kernels (optional)."""
    built = modules()
    members: dict[str, str | bytes] = dict(
        files
        if files is not None
        else {
            "vllm/_C.abi3.so": built["_C"],
            "vllm/_moe_C.abi3.so": built["_moe_C"],
            "vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so": built["fa2"],
            "vllm/cumem_allocator.abi3.so": built["plain"],
        }
    )
    members["vllm/__init__.py"] = f"__version__ = {version!r}\n"
    wheel = wheelhouse.Wheel("vllm", version, members, requires=[torch], tag=tag)
    return wheel.write(folder)


def torch(
    folder: Path, version: str = "2.6.0", cuda: str | None = "12.4", *, tag: str = TORCH_TAG
) -> Path:
    built = modules()
    members: dict[str, str | bytes] = {
        "torch/__init__.py": f"__version__ = {version!r}\n",
        "torch/version.py": f"cuda = {cuda!r}\n",
        "torch/lib/libtorch_cuda.so": built["torch"],
        "torch/lib/libc10_cuda.so": built["plain"],
        "torch/lib/libtorch_cpu.so": built["plain"],  # not a CUDA library: not read
    }
    return wheelhouse.Wheel("torch", version, members, tag=tag).write(folder)
