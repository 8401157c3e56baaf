"""The kernel-image rule: which targets run on which GPU, counted per fatbin container."""

from __future__ import annotations

import pytest

from envkit.errors import BadInput
from envkit.gpu.arch import Capability, lowest_supported, target, toolkit_targets, toolkits_for
from envkit.gpu.binaries import fatbin, images
from envkit.gpu.binaries.images import Verdict

import fatbins
from fatbins import ARCH, FAMILY, PTX, SASS, E


def cap(text: str) -> Capability:
    return Capability.parse(text)


@pytest.mark.parametrize(
    ("name", "runs", "does_not"),
    [
        ("sm_80", ["8.0", "8.6", "8.9"], ["7.5", "9.0", "12.0"]),
        ("sm_86", ["8.6", "8.9"], ["8.0", "9.0"]),
        ("sm_90a", ["9.0"], ["8.9", "10.0"]),
        ("sm_100f", ["10.0", "10.3"], ["9.0", "12.0"]),
        ("sm_120", ["12.0", "12.1"], ["10.0", "11.0"]),
        ("compute_80", ["8.0", "8.6", "9.0", "12.0"], ["7.5"]),
        ("compute_90a", ["9.0"], ["10.0", "8.9"]),
        ("compute_100f", ["10.0", "10.3"], ["12.0", "9.0"]),
    ],
)
def test_which_target_runs_where(name: str, runs: list[str], does_not: list[str]) -> None:
    compiled = target(name)
    assert str(compiled) == name
    assert [compiled.runs_on(cap(c)) for c in runs] == [True] * len(runs)
    assert [compiled.runs_on(cap(c)) for c in does_not] == [False] * len(does_not)


def test_capabilities_and_targets_are_checked_where_they_enter() -> None:
    assert cap("8.6") == Capability(8, 6) == cap("sm_86") == cap("86")
    assert str(cap("12.0")) == "12.0" and cap("12.1").sm == 121
    for bad in ("eight", "8", "8.10", "sm_8", ""):
        with pytest.raises(BadInput):
            cap(bad)
    with pytest.raises(BadInput):
        target("sm_90b")


def test_which_gpus_each_cuda_toolkit_compiles_for() -> None:
    """CUDA 13 drops everything below Turing (7.5); CUDA 12 reaches back to Maxwell (5.0),
    and only from 12.8 on to Blackwell."""
    assert lowest_supported(13) == cap("7.5") and lowest_supported(12) == cap("5.0")
    assert lowest_supported(11) == cap("3.5") and lowest_supported(14) is None
    assert cap("7.0") in toolkit_targets((12, 6)) and cap("7.0") not in toolkit_targets((13, 0))
    assert cap("12.0") not in toolkit_targets((12, 6)) and cap("12.0") in toolkit_targets((12, 8))
    assert toolkit_targets((10, 2)) == ()
    assert toolkits_for(cap("12.0")) == "CUDA 12.8 or newer"
    assert toolkits_for(cap("7.0")) == "CUDA 11.8 to 12.9"
    assert toolkits_for(cap("3.0")) == ""


def images_of(*containers: bytes) -> images.Images:
    found = fatbin.parse(fatbins.section(*containers))
    assert isinstance(found, fatbin.Fatbin)
    return images.images(found)


def test_a_stray_ptx_entry_in_one_container_does_not_cover_the_module() -> None:
    """A library linked in with its own compute_52 PTX covers its own kernels on every GPU,
    not the module's: on 12.0 the module's kernels have no image."""
    held = images_of(
        *[fatbins.container(*fatbins.sass(80, 90))] * 3,
        fatbins.container(E(SASS, 52), E(PTX, 52)),
    )
    on = held.on(cap("12.0"))
    assert on.verdict is Verdict.NO_KERNEL_IMAGE and (on.covering, on.containers) == (1, 4)
    assert held.on(cap("8.6")).verdict is Verdict.RUNS


def test_kernels_for_other_gpus_leave_the_module_running_partly() -> None:
    """vLLM 0.8.5's _C: most containers for sm_70..sm_90, some for sm_90a or sm_80..sm_89
    alone. On 8.6 it runs (its sm_90a kernels are for Hopper); on 12.0 it does not."""
    held = images_of(
        *[fatbins.container(*fatbins.sass(70, 75, 80, 86, 89, 90))] * 4,
        fatbins.container(E(SASS, 90, ARCH)),
        fatbins.container(*fatbins.sass(80, 86, 89)),
        fatbins.container(E(SASS, 52), E(PTX, 52)),
    )
    assert [str(t) for t in held.sass] == [
        "sm_52", "sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a",
    ]  # fmt: skip
    assert [str(t) for t in held.ptx] == ["compute_52"] and held.containers == 7
    assert [sorted(map(str, main)) for main in held.main] == [
        ["sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90"]
    ]
    assert held.on(cap("8.6")).verdict is Verdict.RUNS_PARTLY
    assert held.on(cap("9.0")).verdict is Verdict.RUNS_PARTLY  # not the sm_80..89 container
    assert held.on(cap("12.0")).verdict is Verdict.NO_KERNEL_IMAGE
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
    assert "6 of 7 kernel containers have no image for 12.0" in held.on(cap("12.0")).describe()


def test_arch_specific_kernels_only_on_their_gpu() -> None:
    """A module of sm_90a kernels alone (FlashMLA, FlashAttention 3) runs on 9.0 only; one of
    family kernels (sm_100f) on the 10.x family."""
    hopper = images_of(fatbins.container(E(SASS, 90, ARCH)))
    assert [str(c) for c in hopper.runs_on()] == ["9.0"]
    blackwell = images_of(*[fatbins.container(E(SASS, 100, FAMILY))] * 2)
    assert [str(c) for c in blackwell.runs_on()] == ["10.0", "10.3"]


def test_ptx_alone_runs_everywhere_at_or_above_it() -> None:
    held = images_of(*[fatbins.container(E(PTX, 80), E(SASS, 80))] * 2)
    assert held.on(cap("12.0")).verdict is Verdict.RUNS
    assert held.on(cap("7.5")).verdict is Verdict.NO_KERNEL_IMAGE


def test_no_containers_run_nowhere() -> None:
    held = images_of(fatbins.container())
    assert held.containers == 0 and held.runs_on() == ()
    assert held.describe() == "no SASS or PTX"
