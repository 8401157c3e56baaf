"""The cards envkit knows: report 2's RTX 4060 (8 GiB) and the common GeForce RTX 20-50
desktop and laptop cards and RTX workstation cards, each with NVIDIA's memory and compute
capability."""

from __future__ import annotations

import re

import pytest

from envkit.errors import BadInput
from envkit.gpu import cards
from envkit.gpu.arch import Capability

GIB = cards.GIB
# the capability each GeForce / RTX generation has (NVIDIA's CUDA GPUs list)
GENERATION = {"20": "7.5", "30": "8.6", "40": "8.9", "50": "12.0"}


@pytest.mark.parametrize(
    ("name", "gib", "capability"),
    [
        ("rtx-4060", 8, "8.9"),  # report 2's card: it was "did you mean rtx-4090"
        ("NVIDIA GeForce RTX 4060 Laptop GPU", 8, "8.9"),  # as nvidia-smi names it
        ("rtx-4090-laptop", 16, "8.9"),
        ("GeForce RTX 3060 Laptop GPU", 6, "8.6"),
        ("rtx-3080-laptop-16gb", 16, "8.6"),
        ("rtx-3050", 8, "8.6"),
        ("rtx-2060", 6, "7.5"),
        ("NVIDIA TITAN RTX", 24, "7.5"),
        ("rtx-5060", 8, "12.0"),
        ("rtx-5090-laptop", 24, "12.0"),
        ("Quadro RTX 8000", 48, "7.5"),
        ("rtx-a4000", 16, "8.6"),
        ("NVIDIA RTX 4000 Ada Generation", 20, "8.9"),
        ("rtx-pro-4000", 24, "12.0"),
    ],
)
def test_common_cards(name: str, gib: int, capability: str) -> None:
    card = cards.card(name)
    assert card.memory == gib * GIB and card.capability == Capability.parse(capability)


def test_every_geforce_desktop_and_laptop_family_is_there() -> None:
    keys = set(cards.KEYS)
    for gen in GENERATION:
        for tier in ("60", "70", "80"):
            laptop = {f"rtx-{gen}{tier}-laptop", f"rtx-{gen}{tier}-laptop-8gb"}
            assert f"rtx-{gen}{tier}" in keys, f"rtx-{gen}{tier}"
            assert laptop & keys, f"rtx-{gen}{tier} laptop"
    assert {"rtx-3090", "rtx-4090", "rtx-5090", "rtx-4050-laptop", "rtx-5050"} <= keys


def test_each_geforce_card_has_its_generations_capability() -> None:
    for card in cards.CARDS:
        found = re.search(r"GeForce RTX ([2-5]0)[5-9]0", card.name)
        if found:
            assert str(card.capability) == GENERATION[found.group(1)], card.name


def test_keys_and_names_are_unique_and_resolve_to_their_card() -> None:
    assert len(set(cards.KEYS)) == len(cards.CARDS) == len({c.name for c in cards.CARDS})
    for card in cards.CARDS:
        assert cards.card(card.key) is card
        assert cards.card(card.name) is card
        assert cards.card("NVIDIA " + card.name.removeprefix("NVIDIA ")) is card
        assert 4 * GIB <= card.memory <= 288 * GIB


def test_an_unknown_card_suggests_the_near_ones() -> None:
    with pytest.raises(BadInput, match="Did you mean rtx-4060") as exc:
        cards.card("rtx-4061")
    assert "--gpu-memory" not in str(exc.value)  # commands add what they take themselves
