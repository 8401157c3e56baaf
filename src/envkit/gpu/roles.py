"""Which compiled modules of a build matter how much: the core ones without which nothing runs,
optional kernels, NVIDIA's libraries. The same roles for an installed environment and for a
published wheel."""

from __future__ import annotations

from enum import Enum


class Role(str, Enum):
    CORE = "core"  # torch's libtorch_cuda, vLLM's _C and _moe_C: without them nothing runs
    OPTIONAL = "optional"  # kernels for some features or GPUs (flash-attention, FlashMLA,
    # xformers, torch's linalg): what needs them does not run where they have no image
    LIBRARY = "library"  # NVIDIA's libraries: their CUDA dependencies are checked


# vLLM's modules without which it does not run; every other compiled module of a package is
# optional kernels (vllm_flash_attn, FlashMLA, DeepGEMM, xformers, flash-attn, torchvision)
CORE_VLLM = ("_C", "_moe_C", "_C_stable_libtorch", "_moe_C_stable_libtorch")
# torch's: libtorch_cuda holds its CUDA kernels; libtorch_cuda_linalg is loaded on the first
# linear-algebra call (torch 2.14's carries no sm_75), libtorch_nvshmem serves NVSHMEM
CORE_TORCH = ("libtorch_cuda.so", "libc10_cuda.so", "libtorch_cuda_cu.so", "libtorch_cuda_cpp.so")
