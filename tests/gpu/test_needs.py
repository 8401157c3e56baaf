"""The driver a build needs: from a CUDA version, a lock cell's backend and a profile, read
from NVIDIA's toolkit -> driver table; the shipped profiles each state theirs."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envkit.errors import BadInput
from envkit.gpu.driver import TOOLKIT_DRIVERS, DriverFit, DriverVersion, fit
from envkit.gpu.needs import (
    DriverNeed,
    backend_summary,
    for_backend,
    for_cuda,
    for_profile,
    profile_summary,
)
from envkit.profiles.profile import load_profile, parse_profile

from helpers import ROOT


def profile(torch: str) -> str:
    return f'python = "3.12"\nrequirements = ["vllm==0.8.5"]\n{torch}'


def read(text: str):  # type: ignore[no-untyped-def]
    return parse_profile(text, path=Path("p.toml"), name="p")


def test_a_cuda_build_needs_its_toolkits_driver_and_the_majors_floor() -> None:
    need = for_cuda("12.4")
    assert need == DriverNeed("12.4", "550.54.14", "525.60.13")
    assert need.summary() == "CUDA 12.4 or newer (NVIDIA driver 550.54.14 or newer)"
    assert need.to_dict() == {
        "cuda": "12.4",
        "linux_driver": "550.54.14",
        "minor_compat_floor": "525.60.13",
    }
    assert "525.60.13 or newer also starts it" in need.compat_note()
    # CUDA 13.0's floor is its own driver: minor-version compatibility adds nothing
    assert for_cuda("13.0") == DriverNeed("13.0", "580.65.06", "580.65.06")
    assert for_cuda("13.0").compat_note() == ""
    assert for_cuda("12.8").linux_driver == "570.26"


@pytest.mark.parametrize("cuda", sorted({f"{r.cuda[0]}.{r.cuda[1]}" for r in TOOLKIT_DRIVERS}))
def test_the_stated_driver_is_the_oldest_that_runs_the_build_fully(cuda: str) -> None:
    need = for_cuda(cuda)
    driver = DriverVersion.parse(need.linux_driver)
    assert fit(driver, cuda) is DriverFit.FULL
    below = DriverVersion((*driver.parts[:-1], driver.parts[-1] - 1))
    assert fit(below, cuda) is not DriverFit.FULL
    if need.minor_compat_floor and need.minor_compat_floor != need.linux_driver:
        floor = DriverVersion.parse(need.minor_compat_floor)
        assert fit(floor, cuda) is DriverFit.MINOR_COMPAT


def test_a_cuda_release_the_table_does_not_list_says_so() -> None:
    need = for_cuda("12.7")  # there was no CUDA 12.7
    assert need.linux_driver == "" and need.to_dict()["linux_driver"] is None
    assert "does not list" in need.summary()
    assert for_cuda("13.9").minor_compat_floor == "580.65.06"  # the major's floor still holds


def test_backends() -> None:
    assert for_backend("cu124") == for_cuda("12.4")
    assert for_backend("cu130") == for_cuda("13.0")
    for none in ("cpu", "rocm6.2", "xpu", "", "any"):
        assert for_backend(none) is None, none
    assert backend_summary("cu126") == "CUDA 12.6 or newer (NVIDIA driver 560.28.03 or newer)"
    assert backend_summary("cpu") == "no GPU driver (a CPU build)"
    assert backend_summary("rocm6.2") == "no NVIDIA driver (a rocm6.2 build)"
    assert backend_summary("") == backend_summary("any") == ""


def test_a_profile_needs_the_driver_of_its_torch_build() -> None:
    both = read(profile('[torch]\nbackend = "cu128"\ncuda = "12.8"\n'))
    assert for_profile(both) == for_cuda("12.8")
    assert for_profile(read(profile('[torch]\nbackend = "cu126"\n'))) == for_cuda("12.6")
    # a CUDA named without a backend (torch from the default index, checked to be 12.4)
    assert for_profile(read(profile('[torch]\ncuda = "12.4"\n'))) == for_cuda("12.4")
    cpu = read(profile('[torch]\nbackend = "cpu"\n'))
    assert for_profile(cpu) is None and profile_summary(cpu) == "no GPU driver (a CPU build)"
    rocm = read(profile('[torch]\nbackend = "rocm6.2"\ncuda = "12.4"\n'))
    assert for_profile(rocm) is None  # not CUDA's build, whatever cuda says
    bare = read(profile(""))
    assert for_profile(bare) is None and profile_summary(bare).startswith("not stated")
    odd = read(profile('[torch]\ncuda = "123.4"\n'))  # the profile format lets it through
    assert for_profile(odd) is None


def test_every_shipped_profile_needs_the_driver_of_its_cuda() -> None:
    shipped = sorted((ROOT / "envs").glob("*.toml"))
    assert len(shipped) >= 4
    for path in shipped:
        p = load_profile(path)
        need = for_profile(p)
        assert need is not None and need.cuda == p.torch.cuda and need.linux_driver, path


@given(st.text(max_size=60))
def test_any_cuda_text_gives_a_need_or_bad_input(text: str) -> None:
    try:
        need = for_cuda(text)
    except BadInput as exc:
        assert "is not a version such as 12.4" in exc.message
        return
    assert need.cuda == text.strip() and need.summary().startswith(f"CUDA {need.cuda} ")
