"""GPU facts: NVIDIA's CUDA -> driver table, nvidia-smi's output read into typed GPUs, and
the cards envkit knows."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from properties import examples

from envkit.errors import BadInput
from envkit.gpu import cards
from envkit.gpu.arch import Capability
from envkit.gpu.driver import (
    MIB,
    DriverFit,
    DriverVersion,
    cuda_version,
    fit,
    header_cuda,
    newest_cuda,
    parse_smi,
    toolkit_driver,
)

GIB = 1024**3


@pytest.mark.parametrize(
    ("cuda", "driver"),
    [
        ("11.8", "520.61.05"),
        ("12.0", "525.60.13"),
        ("12.1", "530.30.02"),
        ("12.2", "535.54.03"),
        ("12.3", "545.23.06"),
        ("12.4", "550.54.14"),
        ("12.4.1", "550.54.15"),
        ("12.5", "555.42.02"),
        ("12.6", "560.28.03"),
        ("12.6.3", "560.35.05"),
        ("12.8", "570.26"),
        ("12.8.1", "570.124.06"),
        ("12.9", "575.51.03"),
        ("13.0", "580.65.06"),
    ],
)
def test_the_driver_each_cuda_release_needs(cuda: str, driver: str) -> None:
    found = toolkit_driver(cuda)
    assert found is not None and str(found) == driver


def test_releases_the_table_does_not_list_and_bad_versions() -> None:
    assert toolkit_driver("12.7") is None and toolkit_driver("14.0") is None
    assert cuda_version("12.4") == (12, 4, 0) and cuda_version("13.0.2") == (13, 0, 2)
    with pytest.raises(BadInput, match="is not a version"):
        toolkit_driver("twelve")


def test_what_a_driver_gives() -> None:
    driver = DriverVersion.parse("550.54.15")
    assert newest_cuda(driver) == (12, 4)
    assert newest_cuda(DriverVersion.parse("580.95.05")) == (13, 0)
    assert newest_cuda(DriverVersion.parse("470.82.01")) is None
    assert fit(driver, "12.4") is DriverFit.FULL
    assert fit(driver, "12.8") is DriverFit.MINOR_COMPAT  # a 12.x runtime on a 12.x driver
    assert fit(driver, "13.0") is DriverFit.TOO_OLD
    assert fit(DriverVersion.parse("520.61.05"), "12.4") is DriverFit.TOO_OLD
    assert fit(driver, "12.7") is DriverFit.UNKNOWN
    assert DriverVersion.parse("570.124.06") > DriverVersion.parse("570.26")
    for bad in ("", "570", "five.seventy", "570.26.1.2", "99999.1"):
        with pytest.raises(BadInput):
            DriverVersion.parse(bad)


def test_nvidia_smi_output_read_into_gpus() -> None:
    text = (
        "NVIDIA GeForce RTX 4090, 550.54.14, 24564 MiB, 23000 MiB, 8.9\n"
        "NVIDIA H100 80GB HBM3, 570.124.06, 81559 MiB, 81000 MiB, 9.0\n"
        "\n"
        "NVIDIA GB10, 580.95.05, [N/A], [N/A], 12.1\n"
        "Tesla T4, 535.104.05, 15360, 15000, 7.5\n"  # --format=csv,noheader,nounits
    )
    found = parse_smi(text)
    assert [g.name for g in found] == [
        "NVIDIA GeForce RTX 4090", "NVIDIA H100 80GB HBM3", "NVIDIA GB10", "Tesla T4",
    ]  # fmt: skip
    assert [g.capability for g in found] == [
        Capability(8, 9),
        Capability(9, 0),
        Capability(12, 1),
        Capability(7, 5),
    ]
    assert [g.index for g in found] == [0, 1, 2, 3]
    assert found[0].memory == 24564 * MIB and found[2].memory is None
    assert found[3].free == 15000 * MIB and found[2].free is None
    assert str(found[1].driver) == "570.124.06"
    assert parse_smi("") == ()
    header = "| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2     |"
    assert header_cuda(header) == "12.2" and header_cuda("no header") == ""


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("NVIDIA A10", "no five fields"),
        ("NVIDIA A10, 550.54.14, 24 MiB, 20 MiB, eight", "compute_cap"),
        ("NVIDIA A10, new, 24 MiB, 20 MiB, 8.6", "driver_version"),
        ("NVIDIA A10, 550.54.14, lots, 20 MiB, 8.6", "memory.total"),
        ("NVIDIA A10, 550.54.14, 24 MiB, some, 8.6", "memory.free"),
        ("NVIDIA A10, 550.54.14, 24 MiB, 25 MiB, 8.6", "exceeds memory.total"),
        (", 550.54.14, 24 MiB, 20 MiB, 8.6", "no five fields"),
        ('Field "compute_cap" is not a valid field to query.', "no five fields"),
    ],
)
def test_nvidia_smi_lines_are_checked_where_they_enter(text: str, names: str) -> None:
    with pytest.raises(BadInput) as caught:
        parse_smi(text)
    assert names in str(caught.value) and "nvidia-smi" in str(caught.value)


@settings(max_examples=examples(200), deadline=None)
@given(st.text(max_size=300))
def test_any_nvidia_smi_output_is_gpus_or_bad_input(text: str) -> None:
    try:
        found = parse_smi(text)
    except BadInput:
        return
    assert all(g.capability.major >= 1 for g in found)


@pytest.mark.parametrize(
    ("name", "memory", "capability"),
    [
        ("rtx-5090", 32, (12, 0)),
        ("GeForce RTX 5080", 16, (12, 0)),
        ("b200", 180, (10, 0)),
        ("NVIDIA H200", 141, (9, 0)),
        ("l40s", 48, (8, 9)),
        ("rtx_3090", 24, (8, 6)),
        ("v100-32gb", 32, (7, 0)),
        ("Tesla P100 16GB", 16, (6, 0)),
        ("a100-40gb", 40, (8, 0)),
        ("a100-80gb", 80, (8, 0)),
        ("h100-80gb", 80, (9, 0)),
        ("NVIDIA L4", 24, (8, 9)),
        ("Tesla T4", 16, (7, 5)),
        ("GeForce RTX 2070", 8, (7, 5)),
        ("rtx-4090", 24, (8, 9)),
    ],
)
def test_the_cards_envkit_knows(name: str, memory: int, capability: tuple[int, int]) -> None:
    card = cards.card(name)
    assert (card.memory, (card.capability.major, card.capability.minor)) == (
        memory * GIB,
        capability,
    )


def test_an_unknown_card_names_the_closest() -> None:
    with pytest.raises(BadInput, match="Did you mean rtx-5090"):
        cards.card("rtx-5900")
    assert len({c.key for c in cards.CARDS}) == len(cards.CARDS) == len(cards.GPUS)
