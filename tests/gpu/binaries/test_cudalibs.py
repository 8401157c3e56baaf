"""The CUDA libraries a module needs against what the environment provides, on layouts as
NVIDIA's wheels lay them out and on g++-built stubs with their sonames."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envkit.gpu.binaries import cudalibs, elf
from envkit.gpu.binaries.cudalibs import Family, classify

import elfbuild


@pytest.mark.parametrize(
    ("soname", "family", "major"),
    [
        ("libcudart.so.12", Family.CUDART, 12),
        ("libcudart.so.13", Family.CUDART, 13),
        ("libcublas.so.12", Family.CUBLAS, 12),
        ("libcublasLt.so.13", Family.CUBLASLT, 13),
        ("libcufft.so.11", Family.CUFFT, 11),
        ("libcurand.so.10", Family.CURAND, 10),
        ("libcusparse.so.12", Family.CUSPARSE, 12),
        ("libcusparseLt.so.0", Family.CUSPARSELT, 0),
        ("libcusolver.so.11", Family.CUSOLVER, 11),
        ("libnvrtc.so.13", Family.NVRTC, 13),
        ("libnvrtc-builtins.so.12.4", Family.NVRTC, 12),
        ("libnvJitLink.so.12", Family.NVJITLINK, 12),
        ("libcudnn.so.9", Family.CUDNN, 9),
        ("libcudnn_graph.so.9", Family.CUDNN, 9),
        ("libnccl.so.2", Family.NCCL, 2),
        ("libcupti.so.13", Family.CUPTI, 13),
        ("libcuda.so.1", Family.DRIVER, 1),
        ("libcudart.so", Family.CUDART, None),
    ],
)
def test_cuda_libraries_by_soname(soname: str, family: Family, major: int | None) -> None:
    lib = classify(soname)
    assert lib is not None and (lib.family, lib.major) == (family, major)


@pytest.mark.parametrize(
    "soname", ["libc10.so", "libtorch_cuda.so", "libc.so.6", "cudart", "libcudart.txt"]
)
def test_other_libraries_are_not_cuda(soname: str) -> None:
    assert classify(soname) is None


def lay_out(root: Path, files: list[str]) -> Path:
    for name in files:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"")
    return root


def test_the_layouts_nvidia_wheels_use(tmp_path: Path) -> None:
    """CUDA 12 wheels: one folder per component (nvidia-cuda-runtime-cu12 12.9.79 holds
    nvidia/cuda_runtime/lib/libcudart.so.12); CUDA 13 wheels: one folder for all
    (nvidia-cuda-runtime 13.x holds nvidia/cu13/lib/libcudart.so.13); torch/lib bundles."""
    site = lay_out(
        tmp_path,
        [
            "nvidia/cuda_runtime/lib/libcudart.so.12",
            "nvidia/cublas/lib/libcublas.so.12",
            "nvidia/cublas/lib/libcublasLt.so.12",
            "nvidia/cu13/lib/libcudart.so.13",
            "nvidia/cudnn/lib/libcudnn.so.9",
            "nvidia/cudnn/lib/libcudnn_ops.so.9",
            "cusparselt/lib/libcusparseLt.so.0",
            "torch/lib/libgomp.so.1",
            "torch/lib/libnvrtc-builtins.so.12.4",
            "numpy.libs/libscipy_openblas64_-ff651d7f.so",
            "nvidia/cu13/include/cuda.h",
        ],
    )
    env = cudalibs.provided(site)
    assert env.has("libcudart.so.12") and env.has("libcudart.so.13") and env.has("libcudnn.so.9")
    assert env.has("libcusparseLt.so.0") and not env.has("libnccl.so.2")
    assert env.majors(Family.CUDART) == (12, 13)
    assert dict((lib.soname, where) for lib, where in env.libraries)["libcudart.so.13"] == (
        "nvidia/cu13/lib/libcudart.so.13"
    )
    gone = cudalibs.missing("vllm/_C.abi3.so", ("libnccl.so.2", "libcuda.so.1", "libc.so.6"), env)
    assert [(g.needed.soname, g.instead) for g in gone] == [("libnccl.so.2", ())]
    assert "none of it" in gone[0].describe()


@elfbuild.needs_cxx
def test_a_module_built_for_another_cuda_runtime(tmp_path: Path) -> None:
    """A module linked against a libcudart.so.12 stub, in an environment whose only CUDA
    runtime is libcudart.so.13 (from a stub of that soname): a cuda-runtime-mismatch that
    names the module, the soname and what is there instead."""
    built = elfbuild.built()
    (tmp_path / "nvidia" / "cu13" / "lib").mkdir(parents=True)
    shutil.copy(built.cudart13, tmp_path / "nvidia" / "cu13" / "lib")
    facts = elf.links(built.ext_c10)
    assert isinstance(facts, elf.Links) and "libcudart.so.12" in facts.needed
    env = cudalibs.provided(tmp_path)
    (gone,) = cudalibs.missing("vllm/_C.abi3.so", facts.needed, env)
    assert gone.needed.soname == "libcudart.so.12"
    assert [str(lib) for lib in gone.instead] == ["libcudart.so.13"]
    assert gone.describe() == (
        "vllm/_C.abi3.so needs libcudart.so.12, which nothing in the environment provides "
        "(it has libcudart.so.13 only)"
    )
    stable = elf.links(built.ext_stable)
    assert isinstance(stable, elf.Links)
    assert cudalibs.missing("vllm/_C_stable_libtorch.abi3.so", stable.needed, env) == ()


@elfbuild.needs_cxx
def test_a_file_named_otherwise_provides_its_soname(tmp_path: Path) -> None:
    built = elfbuild.built()
    (tmp_path / "torch" / "lib").mkdir(parents=True)
    shutil.copy(built.cudart12, tmp_path / "torch" / "lib" / "libcudart.so.12.4.127")
    env = cudalibs.provided(tmp_path)
    assert env.has("libcudart.so.12") and env.has("libcudart.so.12.4.127")
    beside = tmp_path / "mine"
    beside.mkdir()
    shutil.copy(built.cudart13, beside / "libcudart.so.13")
    assert cudalibs.missing("m.so", ("libcudart.so.13",), env, beside) == ()
