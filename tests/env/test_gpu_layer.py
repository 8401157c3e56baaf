"""verify, build and doctor check the GPU layer of a venv: kernel images for the GPU
(--gpu, --compute-capability, nvidia-smi), every torch symbol (C++ and the stable C ABI), the
CUDA libraries modules need, the driver. The venvs hold tiny shared objects compiled here
(tests/gpu/elfbuild.py) with fatbin sections built from the documented layout."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import wheelhouse
from helpers import build_args, envkit

sys.path.insert(0, str(Path(__file__).parent.parent / "gpu"))
import elfbuild
import fatbins

pytestmark = elfbuild.needs_cxx
SMS = (70, 75, 80, 86, 89, 90)  # vLLM 0.8.5's _C: SASS for these


def no_smi() -> dict[str, str]:
    """PATH without any nvidia-smi (this machine has none; make sure of it)."""
    dirs = os.environ["PATH"].split(os.pathsep)
    return {"PATH": os.pathsep.join(d for d in dirs if d and not (Path(d) / "nvidia-smi").exists())}


def site(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def kernels(sp: Path, *, stable: bool = False, shims: bool = True) -> Path:
    """vLLM's _C (SASS sm_70..sm_90) and torch's libraries (sm_50..sm_90) into ``sp``; with
    ``stable`` also a stable-ABI module that needs CUDA 13's runtime; without ``shims``
    torch's libtorch_cpu.so lacks the stable ABI's functions."""
    built = elfbuild.built()
    lib = sp / "torch" / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    shutil.copy(built.libc10, lib)
    shutil.copy(built.cudart12, lib)
    if shims:
        shutil.copy(built.libtorch_cpu, lib)
    else:
        elfbuild.compile_so("int nothing() { return 0; }\n", lib / "libtorch_cpu.so")
    torch_kernels = fatbins.container(*fatbins.sass(50, 60, 70, 75, 80, 86, 90))
    fatbins.with_fatbin(built.plain, torch_kernels * 2, lib / "libtorch_cuda.so")
    core = fatbins.section(*[fatbins.container(*fatbins.sass(*SMS))] * 3)
    fatbins.with_fatbin(built.ext_c10, core, sp / "vllm" / "_C.abi3.so")
    if stable:
        fatbins.with_fatbin(built.ext_stable, core, sp / "vllm" / "_C_stable_libtorch.abi3.so")
    return sp


def checks(res: Any) -> dict[tuple[str, str], dict[str, Any]]:
    return {(c["kind"], c["name"]): c for c in res.json()["checks"]}


def test_without_a_gpu_verify_says_which_gpus_the_venv_runs_on(built_copy: Path) -> None:
    kernels(site(built_copy / ".venv"))
    res = envkit("verify", "good", "--json", cwd=built_copy, env=no_smi())
    res.assert_ok()
    found = checks(res)
    images = found["gpu", "kernel images"]
    assert images["status"] == "pass" and images["found"].startswith("core kernels run on 7.0 (")
    assert "8.6 (" in images["found"] and "12.0" not in images["found"]
    assert "8.0 (A100 40GB, A100 80GB, ...)" in images["found"]  # cards of each, for people
    linked = found["kernels", "vllm"]
    assert (
        linked["found"] == "1 module needs 1 torch symbol (C++ and stable C ABI); torch defines it"
    )
    assert found["cuda", "cuda libraries"]["status"] == "pass"
    gpu = res.json()["gpu"]
    assert gpu["capability"] is None and gpu["source"] == ""
    assert gpu["runs_on"][:3] == ["7.0", "7.2", "7.5"] and "12.0" not in gpu["runs_on"]


def test_a_gpu_without_kernel_images_fails_verify_and_doctor(built_copy: Path) -> None:
    kernels(site(built_copy / ".venv"))
    res = envkit("verify", "good", "--gpu", "rtx-5090", "--json", cwd=built_copy, env=no_smi())
    assert res.code == 1
    core = checks(res)["gpu", "vllm/_C.abi3.so"]
    assert core["status"] == "fail" and core["found"] == "no-kernel-image"
    assert "no kernel image for compute capability 12.0 (GeForce RTX 5090)" in core["detail"]
    assert "SASS sm_70 sm_75 sm_80 sm_86 sm_89 sm_90" in core["detail"]
    assert "compiled for 12.0" in core["fix"] and "envkit build good" in core["fix"]
    assert checks(res)["gpu", "torch/lib/libtorch_cuda.so"]["status"] == "fail"
    gpu = res.json()["gpu"]
    assert (gpu["capability"], gpu["source"]) == ("12.0", "--gpu rtx-5090")
    text = envkit("verify", "good", "--gpu", "rtx-5090", cwd=built_copy, env=no_smi())
    assert text.code == 1 and "gpu compute capability 12.0 (GeForce RTX 5090)" in text.out
    assert "no kernel image is available" in text.out
    ok = envkit("verify", "good", "--compute-capability", "8.6", "--json", cwd=built_copy)
    ok.assert_ok()
    passed = checks(ok)["gpu", "kernel images"]
    assert passed["status"] == "pass" and "--compute-capability 8.6" in passed["found"]
    diagnosis = envkit(
        "doctor", "--venv", ".venv", "--gpu", "b200", "--json", cwd=built_copy, env=no_smi()
    )
    assert diagnosis.code == 1
    found = {f["where"]: f for f in diagnosis.json()["findings"] if f["code"] == "no-kernel-image"}
    assert set(found) == {"vllm/_C.abi3.so", "torch/lib/libtorch_cuda.so"}
    assert diagnosis.json()["gpu"]["capability"] == "10.0"


def test_stable_abi_symbols_and_a_foreign_cuda_runtime(built_copy: Path) -> None:
    """vLLM's stable-ABI module needs aoti_torch_* shims torch lacks, and CUDA 13's runtime
    beside torch's CUDA 12: both fail verify, naming the module and what is missing."""
    kernels(site(built_copy / ".venv"), stable=True, shims=False)
    res = envkit("verify", "good", "--json", cwd=built_copy, env=no_smi())
    assert res.code == 1
    found = checks(res)
    linked = found["kernels", "vllm/_C_stable_libtorch.abi3.so"]
    assert linked["status"] == "fail" and "aoti_torch_get_device_index" in linked["detail"]
    assert "and 2 more" in linked["detail"]
    runtime = found["cuda", "vllm/_C_stable_libtorch.abi3.so"]
    assert runtime["status"] == "fail" and runtime["found"] == "cuda-runtime-mismatch"
    assert "libcudart.so.13" in runtime["detail"]


def test_the_driver_against_torch_cuda_runtime(built_copy: Path) -> None:
    kernels(site(built_copy / ".venv"))
    args = ("verify", "good", "--gpu", "a100-80gb", "--json")
    old = envkit(*args, "--driver", "520.61.05", cwd=built_copy, env=no_smi())
    assert old.code == 1
    driver = checks(old)["driver", "driver"]
    assert (driver["code"], driver["found"]) == ("driver-too-old", "driver 520.61.05")
    assert "driver 520.61.05 cannot run torch's CUDA 12.4" in driver["detail"]
    assert driver["fix"].startswith("install NVIDIA driver 550.54.14 or newer")
    new = envkit(*args, "--driver", "550.54.14", cwd=built_copy, env=no_smi())
    new.assert_ok()
    assert checks(new)["driver", "driver"]["found"] == "driver 550.54.14"
    bad = envkit(*args, "--driver", "five", cwd=built_copy)
    bad.assert_fails(2, mentioning="--driver 'five' is not an NVIDIA driver version")
    clash = envkit("verify", "good", "--gpu", "t4", "--compute-capability", "8.0", cwd=built_copy)
    clash.assert_fails(2, mentioning="--gpu t4 has compute capability 7.5, not 8.0")


def test_build_keeps_the_old_venv_when_the_new_one_has_no_kernels_for_the_gpu(
    project: Path, tmp_path: Path
) -> None:
    """The new environment's compiled modules are read before the swap: one without kernel
    images for the GPU is not swapped in."""
    staging = kernels(tmp_path / "wheel-files")
    files = {str(p.relative_to(staging)): p.read_bytes() for p in staging.rglob("*") if p.is_file()}
    vllm = wheelhouse.vllm()
    vllm.files.update({k: v for k, v in files.items() if k.startswith("vllm/")})
    torch = wheelhouse.torch("2.6.0", cuda="12.4")
    torch.files.update({k: v for k, v in files.items() if k.startswith("torch/")})
    index = wheelhouse.write_index(
        tmp_path / "index",
        [vllm, torch, wheelhouse.transformers("4.51.3", with_attribute=True)],
    )
    args = ("build", "good", "--json", *build_args(index))
    first = envkit(*args, "--gpu", "a100-80gb", cwd=project, env=no_smi())
    first.assert_ok()
    marker = (project / ".venv" / "envkit-build.json").read_text()
    again = envkit(*args, "--gpu", "rtx-5090", cwd=project, env=no_smi())
    assert again.code == 1 and again.json()["kept_previous"] is True
    failed = [c for c in again.json()["verify"]["checks"] if c["status"] == "fail"]
    assert {c["kind"] for c in failed} == {"gpu"}
    assert (project / ".venv" / "envkit-build.json").read_text() == marker


def test_a_warning_is_not_fixed_by_the_build_that_just_ran(project: Path, tmp_path: Path) -> None:
    """cupy's cuDNN bindings need a CUDA library the venv lacks, and vLLM never loads them:
    a warning. Right after `envkit build` the fix says no action is needed unless they are
    imported (that build is what a rebuild would make again); verify of the same venv later,
    which may have drifted, also names the rebuild."""
    staging = kernels(tmp_path / "wheel-files")
    libs = elfbuild.built().root / "lib"
    elfbuild.compile_so(
        elfbuild.USES_CUDART, staging / "cupy_backends" / "cudnn.so", f"-L{libs}",
        "-Wl,--no-as-needed", "-l:libcudart.so.13",
    )  # fmt: skip
    files = {str(p.relative_to(staging)): p.read_bytes() for p in staging.rglob("*") if p.is_file()}
    vllm = wheelhouse.vllm()
    vllm.files.update({k: v for k, v in files.items() if not k.startswith("torch/")})
    torch = wheelhouse.torch("2.6.0", cuda="12.4")
    torch.files.update({k: v for k, v in files.items() if k.startswith("torch/")})
    index = wheelhouse.write_index(
        tmp_path / "index",
        [vllm, torch, wheelhouse.transformers("4.51.3", with_attribute=True)],
    )
    res = envkit("build", "good", "--json", *build_args(index), cwd=project, env=no_smi())
    res.assert_ok()
    after = {(c["kind"], c["name"]): c for c in res.json()["verify"]["checks"]}
    warned = after["cuda", "cupy_backends/cudnn.so"]
    assert warned["status"] == "warn" and "libcudart.so.13" in warned["detail"]
    assert warned["fix"].startswith("no action is needed unless something imports cupy_backends")
    assert "rebuild" not in warned["fix"] and "envkit build" not in warned["fix"]
    text = envkit("build", "good", *build_args(index), cwd=project, env=no_smi())
    shown = " ".join(text.out.split())
    assert "no action is needed unless something imports cupy_backends" in shown, text.out
    assert "rebuild" not in shown
    later = envkit("verify", "good", "--json", cwd=project, env=no_smi())
    later.assert_ok()
    again = checks(later)["cuda", "cupy_backends/cudnn.so"]
    assert again["fix"].startswith("no action is needed unless something imports cupy_backends")
    assert again["fix"].endswith("rebuild: envkit build good")
