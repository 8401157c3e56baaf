"""The CUDA libraries a module needs, and which of them the environment provides.

A compiled module names the CUDA libraries it needs by soname in its ``NEEDED`` entries, the
major in the name (``libcudart.so.12``, ``libcublas.so.12``, ``libcudnn.so.9``): a CUDA 12
build does not load against ``libcudart.so.13``. torch's and vLLM's wheels take them from
NVIDIA's wheels in the same site-packages, laid out per component for CUDA 12
(``nvidia/cuda_runtime/lib/libcudart.so.12``, ``nvidia/cublas/lib/...``) and in one folder
for CUDA 13 (``nvidia/cu13/lib/libcudart.so.13``), or bundled in ``torch/lib``. The driver's
own library, ``libcuda.so.1`` (and NVML's ``libnvidia-ml.so.1``), comes with the driver on
the machine and is never looked for in the environment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from envkit.gpu.binaries.filecache import FileCache


class Family(str, Enum):
    CUDART = "cudart"
    CUBLAS = "cublas"
    CUBLASLT = "cublasLt"
    CUFFT = "cufft"
    CURAND = "curand"
    CUSPARSE = "cusparse"
    CUSPARSELT = "cusparseLt"
    CUSOLVER = "cusolver"
    NVRTC = "nvrtc"
    NVJITLINK = "nvJitLink"
    CUDNN = "cudnn"
    NCCL = "nccl"
    CUPTI = "cupti"
    NVTX = "nvToolsExt"
    CUFILE = "cufile"
    NVSHMEM = "nvshmem"
    DRIVER = "driver"  # libcuda.so.1, libnvidia-ml.so.1: the machine's, not the venv's


# soname stem -> family; the stem is everything before ".so"
_STEMS = {
    "libcudart": Family.CUDART,
    "libcublas": Family.CUBLAS,
    "libcublasLt": Family.CUBLASLT,
    "libcufft": Family.CUFFT,
    "libcufftw": Family.CUFFT,
    "libcurand": Family.CURAND,
    "libcusparse": Family.CUSPARSE,
    "libcusparseLt": Family.CUSPARSELT,
    "libcusolver": Family.CUSOLVER,
    "libcusolverMg": Family.CUSOLVER,
    "libnvrtc": Family.NVRTC,
    "libnvrtc-builtins": Family.NVRTC,
    "libnvJitLink": Family.NVJITLINK,
    "libcudnn": Family.CUDNN,
    "libnccl": Family.NCCL,
    "libcupti": Family.CUPTI,
    "libnvToolsExt": Family.NVTX,
    "libcufile": Family.CUFILE,
    "libnvshmem_host": Family.NVSHMEM,
    "libcuda": Family.DRIVER,
    "libnvidia-ml": Family.DRIVER,
}
_SONAME = re.compile(r"(lib[A-Za-z0-9_+-]+?)\.so((?:\.[0-9]+)*)")
MAX_LIBRARY_FILES = 5000  # files looked at in the library folders


@dataclass(frozen=True, order=True)
class CudaLib:
    """A CUDA library by soname: ``libcudart.so.12`` is cudart of major 12."""

    soname: str
    family: Family
    major: int | None  # None for an unversioned soname (libcudart.so)

    def __str__(self) -> str:
        return self.soname


def classify(soname: str) -> CudaLib | None:
    """The CUDA library ``soname`` names; None when it is not one (libc10.so, libc.so.6).
    cuDNN's parts (``libcudnn_ops.so.9``) are cuDNN."""
    match = _SONAME.fullmatch(soname)
    if not match:
        return None
    stem = match.group(1)
    family = _STEMS.get(stem) or (Family.CUDNN if stem.startswith("libcudnn_") else None)
    if family is None:
        return None
    numbers = match.group(2).split(".")[1:]
    return CudaLib(soname, family, int(numbers[0]) if numbers else None)


@dataclass(frozen=True)
class Provided:
    """The CUDA libraries an environment holds, by soname, with where each one is."""

    libraries: tuple[tuple[CudaLib, str], ...]  # (library, path relative to site-packages)

    def has(self, soname: str) -> bool:
        return any(lib.soname == soname for lib, _ in self.libraries)

    def family(self, family: Family) -> tuple[CudaLib, ...]:
        """What the environment has of one family, e.g. (libcudart.so.13,)."""
        return tuple(sorted({lib for lib, _ in self.libraries if lib.family is family}))

    def majors(self, family: Family) -> tuple[int, ...]:
        return tuple(sorted({lib.major for lib in self.family(family) if lib.major is not None}))


def library_folders(site_packages: Path) -> list[Path]:
    """Where torch and NVIDIA's wheels put shared libraries: ``torch/lib``, ``nvidia/*/lib``
    (CUDA 12 per component, ``nvidia/cu13/lib`` for CUDA 13), ``nvidia/*/lib64``, a
    top-level ``*/lib`` holding NVIDIA's libraries (``cusparselt/lib``), and auditwheel's
    ``*.libs`` folders."""
    patterns = ("torch/lib", "nvidia/*/lib", "nvidia/*/lib64", "cusparselt/lib", "*.libs")
    found: list[Path] = []
    for pattern in patterns:
        found.extend(p for p in sorted(site_packages.glob(pattern)) if p.is_dir())
    return found


def provided(site_packages: Path, cache: FileCache | None = None) -> Provided:
    """Every CUDA library the environment at ``site_packages`` holds, by file name and, for
    a file whose name is not its soname (``libcudart.so.12.4.127``), by its DT_SONAME."""
    from envkit.gpu.binaries import elf  # pyelftools: only where ELF files are read

    cache = cache or FileCache()
    found: set[tuple[CudaLib, str]] = set()
    looked = 0
    for folder in library_folders(site_packages):
        for path in sorted(folder.iterdir()):
            looked += 1
            if looked > MAX_LIBRARY_FILES:
                break
            lib = classify(path.name)
            if lib is None or not path.is_file():
                continue
            where = path.relative_to(site_packages).as_posix()
            found.add((lib, where))
            facts = cache.get(path, elf.links)
            if isinstance(facts, elf.Links) and facts.soname and facts.soname != path.name:
                named = classify(facts.soname)
                if named is not None:
                    found.add((named, where))
    return Provided(tuple(sorted(found)))


@dataclass(frozen=True)
class Missing:
    """A CUDA library a module needs that nothing in the environment provides."""

    module: str  # relative to site-packages
    needed: CudaLib
    instead: tuple[CudaLib, ...]  # what the environment has of that family

    def describe(self) -> str:
        have = ", ".join(map(str, self.instead)) + " only" if self.instead else "none of it"
        return (
            f"{self.module} needs {self.needed}, which nothing in the environment provides "
            f"(it has {have})"
        )


def missing(
    module: str, needed: tuple[str, ...], env: Provided, beside: Path | None = None
) -> tuple[Missing, ...]:
    """The CUDA libraries among ``needed`` (a module's NEEDED entries) that neither the
    environment nor the module's own folder (``beside``, its ``$ORIGIN``) provides; the
    driver's libraries are never missing here."""
    gone = []
    for soname in needed:
        lib = classify(soname)
        if lib is None or lib.family is Family.DRIVER or env.has(soname):
            continue
        if beside is not None and (beside / soname).is_file():
            continue
        gone.append(Missing(module, lib, env.family(lib.family)))
    return tuple(gone)
