"""gpu.installed.assess on a site-packages laid out as real ones are, from g++-built stubs given
fatbins: torch's libraries, vLLM's core and backend modules, a top-level flash-attn module
built for another CUDA runtime, NVIDIA's runtime library."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sites import FLASH, site_template

from envkit.gpu.arch import Capability
from envkit.gpu.binaries.images import Verdict
from envkit.gpu.driver import DriverVersion
from envkit.gpu.installed.assess import GpuReport, assess
from envkit.gpu.roles import Role
from envkit.gpu.target import GpuTarget
from envkit.results import Severity

import elfbuild
import fatbins
from fatbins import ARCH, SASS, E

pytestmark = elfbuild.needs_cxx


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return site_template()


def codes(report: GpuReport) -> list[str]:
    return sorted(f.code for f in report.findings)


def test_with_no_target_it_says_which_gpus_the_environment_runs_on(site: Path) -> None:
    report = assess(site)
    assert [str(c) for c in report.runs_on] == [
        "7.0",
        "7.2",
        "7.5",
        "8.0",
        "8.6",
        "8.7",
        "8.9",
        "9.0",
    ]
    (runs,) = [f for f in report.findings if f.code == "runs-on"]
    assert runs.severity is Severity.INFO and "7.0, 7.2, 7.5, 8.0" in runs.message
    assert report.torch_cuda == "12.4" and report.target is None
    roles = {m.path: m.role for m in report.modules}
    assert (
        roles["torch/lib/libtorch_cuda.so"] is Role.CORE and roles["vllm/_C.abi3.so"] is Role.CORE
    )
    assert roles["vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so"] is Role.OPTIONAL
    assert roles["nvidia/cuda_runtime/lib/libcudart.so.12"] is Role.LIBRARY
    assert report.packages == ("flash_attn", "nvidia", "torch", "vllm")


def test_a_blackwell_card_without_kernel_images(site: Path) -> None:
    """On an RTX 5090 (12.0): torch's and vLLM's core kernels have no image (errors), the
    optional flash-attention backend none either (a warning)."""
    report = assess(site, GpuTarget(Capability(12, 0), "NVIDIA GeForce RTX 5090"))
    assert not report.ok
    errors = [f for f in report.findings if f.code == "no-kernel-image"]
    assert sorted(f.subject for f in errors) == ["torch/lib/libtorch_cuda.so", "vllm/_C.abi3.so"]
    vllm = next(f for f in errors if f.subject == "vllm/_C.abi3.so")
    assert "12.0 (NVIDIA GeForce RTX 5090)" in vllm.message
    assert "SASS sm_52 sm_70 sm_75 sm_80 sm_86 sm_89 sm_90 sm_90a; PTX compute_52" in vllm.message
    assert "CUDA 12.8 or newer" in vllm.fix
    (backend,) = [f for f in report.findings if f.code == "backend-without-kernels"]
    assert backend.severity is Severity.WARNING and "_vllm_fa2_C" in backend.subject


def test_a_card_it_runs_on(site: Path) -> None:
    report = assess(site, GpuTarget(Capability(8, 6)))
    assert "no-kernel-image" not in codes(report) and "backend-without-kernels" not in codes(report)
    coverage = {m.path: m.coverage for m in report.modules if m.coverage is not None}
    assert coverage["vllm/_C.abi3.so"].verdict is Verdict.RUNS_PARTLY  # its sm_90a kernels
    assert coverage["torch/lib/libtorch_cuda.so"].verdict is Verdict.RUNS


def test_a_module_built_for_another_cuda_runtime(site: Path) -> None:
    report = assess(site, GpuTarget(Capability(8, 6)))
    (mismatch,) = [f for f in report.findings if f.code == "cuda-runtime-mismatch"]
    assert mismatch.subject == "flash_attn/ops.so" and mismatch.severity is Severity.ERROR
    assert "needs libcudart.so.13" in mismatch.message
    assert "(it has libcudart.so.12 only) (and 1 more of flash_attn's modules)" in mismatch.message


def test_a_standalone_cuda_package_lacking_a_library_is_a_warning(
    tmp_path: Path, site: Path
) -> None:
    """cupy's cuDNN bindings need libcudnn.so.8 beside torch's cuDNN 9 (a real locked vLLM
    0.8.5 venv): they do not link torch and vLLM never loads them, so it is a warning."""
    copy = tmp_path / "site-packages"
    shutil.copytree(site, copy, symlinks=True)
    (copy / "flash_attn").rename(tmp_path / "gone")
    (copy / FLASH).unlink()
    libs = elfbuild.built().root / "lib"
    elfbuild.compile_so(
        elfbuild.USES_CUDART, copy / "cupy_backends" / "cudnn.so", f"-L{libs}",
        "-Wl,--no-as-needed", "-l:libcudart.so.13",
    )  # fmt: skip
    report = assess(copy, GpuTarget(Capability(8, 6)))
    (mismatch,) = [f for f in report.findings if f.code == "cuda-runtime-mismatch"]
    assert mismatch.subject == "cupy_backends/cudnn.so" and mismatch.severity is Severity.WARNING
    assert "cupy_backends does not link torch, so vLLM does not load it" in mismatch.message
    assert mismatch.fix.startswith("no action is needed unless something imports cupy_backends")
    assert report.ok


def test_the_linkage_of_every_package_that_links_torch(site: Path) -> None:
    report = assess(site)
    assert report.linkage is not None and report.linkage.links
    counted = {p.package: (len(p.modules), p.symbols) for p in report.linkage.packages}
    assert counted == {"flash_attn": (2, 3), "vllm": (2, 1)}


def test_a_torch_without_the_stable_abi(tmp_path: Path, site: Path) -> None:
    """flash-attn built on torch's stable ABI, against a torch whose libtorch_cpu.so has no
    shims: three undefined symbols, counted for its package."""
    copy = tmp_path / "site-packages"
    shutil.copytree(site, copy, symlinks=True)
    shutil.copy(elfbuild.built().libc10, copy / "torch" / "lib" / "libtorch_cpu.so")
    report = assess(copy)
    (broken,) = [f for f in report.findings if f.code == "kernels-do-not-link"]
    assert broken.subject == "flash_attn/ops.so"
    assert "aoti_torch_get_device_index and 5 more" in broken.message
    assert "3 torch symbols checked in 2 modules of flash_attn" in broken.message


@pytest.mark.parametrize(
    ("driver", "code", "severity"),
    [
        ("550.54.14", "driver-fits", Severity.OK),
        ("535.104.05", "driver-older-than-toolkit", Severity.WARNING),
        ("520.61.05", "driver-too-old", Severity.ERROR),
    ],
)
def test_the_driver_against_torchs_cuda(
    site: Path, driver: str, code: str | None, severity: Severity | None
) -> None:
    report = assess(site, GpuTarget(Capability(8, 6), "A10", DriverVersion.parse(driver)))
    found = [f for f in report.findings if f.code.startswith("driver-")]
    assert [(f.code, f.severity) for f in found] == ([(code, severity)] if code else [])


def test_damaged_files_are_findings_not_exceptions(tmp_path: Path, site: Path) -> None:
    copy = tmp_path / "site-packages"
    shutil.copytree(site, copy, symlinks=True)
    core = copy / "vllm" / "_C.abi3.so"
    data = bytearray(core.read_bytes())
    at = data.find(fatbins.container(E(SASS, 90, ARCH)))
    data[at + 4] = 7  # that container's version
    core.write_bytes(bytes(data))
    (copy / "vllm" / "broken.so").write_bytes(b"\x7fELF" + bytes(200))
    report = assess(copy, GpuTarget(Capability(8, 6)))
    damaged = {f.subject: f.message for f in report.findings if f.code == "kernels-not-checked"}
    assert "fatbin container version 7" in damaged["vllm/_C.abi3.so"]
    assert "not a readable ELF file" in damaged["vllm/broken.so"]
    assert report.seconds < 30 and report.files_read > 0
