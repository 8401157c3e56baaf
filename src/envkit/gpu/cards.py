"""The GPU side of ``envkit plan``'s input: sizes with units, cards envkit knows (memory and
compute capability), compute capabilities. Each is checked where it enters: BadInput naming
the option and the value."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from envkit.errors import BadInput
from envkit.gpu.arch import Capability

GIB = 1024**3
_UNITS = {
    "b": 1,
    "k": 1000,
    "m": 1000**2,
    "g": 1000**3,
    "t": 1000**4,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
MAX_SIZE = 2**50  # 1 PiB: no GPU (or reserve) is larger


def parse_size(text: str, what: str = "size", *, allow_zero: bool = False) -> int:
    """``8GiB``, ``6.98GiB``, ``24GB``, ``512MiB``: a number and a unit (a bare number is
    refused: ``--gpu-memory 8`` would silently mean 8 bytes)."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kmgt](?:ib|b)?|b)?\s*", text.lower())
    shown = text if len(text) <= 40 else text[:37] + "..."
    if not match or not match.group(2):
        raise BadInput(
            f"{what} {shown!r} is not a size with a unit.",
            "Write it like 8GiB, 7.5G, 6.98GiB, 24GB or 512MiB (GiB = 1024^3 bytes, GB = 1000^3).",
        )
    # exact decimal arithmetic: a float of 400 nines is infinity, and int() of it a crash
    digits = match.group(1)
    size = Decimal(digits) * _UNITS[match.group(2)] if len(digits) <= 40 else Decimal(MAX_SIZE + 1)
    if size > MAX_SIZE or (size < 1 and not (allow_zero and size == 0)):
        raise BadInput(
            f"{what} {shown!r} is out of range.",
            "Give the size of a real GPU (above 0, below 1 PiB), e.g. 8GiB.",
        )
    return int(size)


@dataclass(frozen=True)
class Card:
    """A GPU envkit knows: its name as NVIDIA writes it, its memory and compute capability."""

    key: str  # the --gpu name: rtx-4090, a100-80gb
    name: str  # NVIDIA A100 80GB, GeForce RTX 4090
    memory: int  # bytes (the vendor's GB as GiB, as nvidia-smi's MiB round to)
    capability: Capability
    platform: str = "linux-x86_64"  # the host it comes in: Grace (GH200, GB200, GB10) is aarch64


def _card(key: str, name: str, gib: int, capability: str, platform: str = "") -> Card:
    return Card(key, name, gib * GIB, Capability.parse(capability), platform or "linux-x86_64")


# Common cards: memory and compute capability, from NVIDIA's published specs (the CUDA GPUs
# list for the capability: Turing 7.5, Ampere GA10x 8.6, Ada 8.9, consumer Blackwell 12.0;
# each product page for the memory). Laptop GPUs are named as nvidia-smi names them
# ("... Laptop GPU"); a card sold with two memory sizes has one key per size. Keys and names
# are matched lower-case with spaces and underscores as '-', "nvidia-", "geforce-", "tesla-"
# and "quadro-" dropped.
_DATACENTRE = (
    _card("p100", "Tesla P100 16GB", 16, "6.0"),
    _card("p40", "Tesla P40", 24, "6.1"),
    _card("v100-16gb", "Tesla V100 16GB", 16, "7.0"),
    _card("v100-32gb", "Tesla V100 32GB", 32, "7.0"),
    _card("t4", "Tesla T4", 16, "7.5"),
    _card("a100-40gb", "NVIDIA A100 40GB", 40, "8.0"),
    _card("a100-80gb", "NVIDIA A100 80GB", 80, "8.0"),
    _card("a30", "NVIDIA A30", 24, "8.0"),
    _card("a10", "NVIDIA A10", 24, "8.6"),
    _card("a10g", "NVIDIA A10G", 24, "8.6"),
    _card("a40", "NVIDIA A40", 48, "8.6"),
    _card("l4", "NVIDIA L4", 24, "8.9"),
    _card("l40", "NVIDIA L40", 48, "8.9"),
    _card("l40s", "NVIDIA L40S", 48, "8.9"),
    _card("h100-80gb", "NVIDIA H100 80GB", 80, "9.0"),
    _card("h100-nvl", "NVIDIA H100 NVL", 94, "9.0"),
    _card("h200", "NVIDIA H200", 141, "9.0"),
    _card("gh200", "NVIDIA GH200 96GB", 96, "9.0", "linux-aarch64"),
    _card("b200", "NVIDIA B200", 180, "10.0"),
    _card("gb200", "NVIDIA GB200", 186, "10.0", "linux-aarch64"),
    _card("b300", "NVIDIA B300", 288, "10.3"),
    _card("gb10", "NVIDIA GB10 (DGX Spark)", 128, "12.1", "linux-aarch64"),
)
_GEFORCE_DESKTOP = (
    _card("rtx-2060", "GeForce RTX 2060", 6, "7.5"),
    _card("rtx-2060-12gb", "GeForce RTX 2060 12GB", 12, "7.5"),
    _card("rtx-2060-super", "GeForce RTX 2060 SUPER", 8, "7.5"),
    _card("rtx-2070", "GeForce RTX 2070", 8, "7.5"),
    _card("rtx-2070-super", "GeForce RTX 2070 SUPER", 8, "7.5"),
    _card("rtx-2080", "GeForce RTX 2080", 8, "7.5"),
    _card("rtx-2080-super", "GeForce RTX 2080 SUPER", 8, "7.5"),
    _card("rtx-2080-ti", "GeForce RTX 2080 Ti", 11, "7.5"),
    _card("titan-rtx", "NVIDIA TITAN RTX", 24, "7.5"),
    _card("rtx-3050", "GeForce RTX 3050", 8, "8.6"),
    _card("rtx-3050-6gb", "GeForce RTX 3050 6GB", 6, "8.6"),
    _card("rtx-3060", "GeForce RTX 3060", 12, "8.6"),
    _card("rtx-3060-8gb", "GeForce RTX 3060 8GB", 8, "8.6"),
    _card("rtx-3060-ti", "GeForce RTX 3060 Ti", 8, "8.6"),
    _card("rtx-3070", "GeForce RTX 3070", 8, "8.6"),
    _card("rtx-3070-ti", "GeForce RTX 3070 Ti", 8, "8.6"),
    _card("rtx-3080", "GeForce RTX 3080", 10, "8.6"),
    _card("rtx-3080-12gb", "GeForce RTX 3080 12GB", 12, "8.6"),
    _card("rtx-3080-ti", "GeForce RTX 3080 Ti", 12, "8.6"),
    _card("rtx-3090", "GeForce RTX 3090", 24, "8.6"),
    _card("rtx-3090-ti", "GeForce RTX 3090 Ti", 24, "8.6"),
    _card("rtx-4060", "GeForce RTX 4060", 8, "8.9"),
    _card("rtx-4060-ti", "GeForce RTX 4060 Ti", 8, "8.9"),
    _card("rtx-4060-ti-16gb", "GeForce RTX 4060 Ti 16GB", 16, "8.9"),
    _card("rtx-4070", "GeForce RTX 4070", 12, "8.9"),
    _card("rtx-4070-super", "GeForce RTX 4070 SUPER", 12, "8.9"),
    _card("rtx-4070-ti", "GeForce RTX 4070 Ti", 12, "8.9"),
    _card("rtx-4070-ti-super", "GeForce RTX 4070 Ti SUPER", 16, "8.9"),
    _card("rtx-4080", "GeForce RTX 4080", 16, "8.9"),
    _card("rtx-4080-super", "GeForce RTX 4080 SUPER", 16, "8.9"),
    _card("rtx-4090", "GeForce RTX 4090", 24, "8.9"),
    _card("rtx-5050", "GeForce RTX 5050", 8, "12.0"),
    _card("rtx-5060", "GeForce RTX 5060", 8, "12.0"),
    _card("rtx-5060-ti", "GeForce RTX 5060 Ti", 8, "12.0"),
    _card("rtx-5060-ti-16gb", "GeForce RTX 5060 Ti 16GB", 16, "12.0"),
    _card("rtx-5070", "GeForce RTX 5070", 12, "12.0"),
    _card("rtx-5070-ti", "GeForce RTX 5070 Ti", 16, "12.0"),
    _card("rtx-5080", "GeForce RTX 5080", 16, "12.0"),
    _card("rtx-5090", "GeForce RTX 5090", 32, "12.0"),
)
_GEFORCE_LAPTOP = (
    _card("rtx-2060-laptop", "GeForce RTX 2060 Laptop GPU", 6, "7.5"),
    _card("rtx-2070-laptop", "GeForce RTX 2070 Laptop GPU", 8, "7.5"),
    _card("rtx-2070-super-laptop", "GeForce RTX 2070 SUPER Laptop GPU", 8, "7.5"),
    _card("rtx-2080-laptop", "GeForce RTX 2080 Laptop GPU", 8, "7.5"),
    _card("rtx-2080-super-laptop", "GeForce RTX 2080 SUPER Laptop GPU", 8, "7.5"),
    _card("rtx-3050-laptop", "GeForce RTX 3050 Laptop GPU", 4, "8.6"),
    _card("rtx-3050-ti-laptop", "GeForce RTX 3050 Ti Laptop GPU", 4, "8.6"),
    _card("rtx-3060-laptop", "GeForce RTX 3060 Laptop GPU", 6, "8.6"),
    _card("rtx-3070-laptop", "GeForce RTX 3070 Laptop GPU", 8, "8.6"),
    _card("rtx-3070-ti-laptop", "GeForce RTX 3070 Ti Laptop GPU", 8, "8.6"),
    _card("rtx-3080-laptop-8gb", "GeForce RTX 3080 Laptop GPU 8GB", 8, "8.6"),
    _card("rtx-3080-laptop-16gb", "GeForce RTX 3080 Laptop GPU 16GB", 16, "8.6"),
    _card("rtx-3080-ti-laptop", "GeForce RTX 3080 Ti Laptop GPU", 16, "8.6"),
    _card("rtx-4050-laptop", "GeForce RTX 4050 Laptop GPU", 6, "8.9"),
    _card("rtx-4060-laptop", "GeForce RTX 4060 Laptop GPU", 8, "8.9"),
    _card("rtx-4070-laptop", "GeForce RTX 4070 Laptop GPU", 8, "8.9"),
    _card("rtx-4080-laptop", "GeForce RTX 4080 Laptop GPU", 12, "8.9"),
    _card("rtx-4090-laptop", "GeForce RTX 4090 Laptop GPU", 16, "8.9"),
    _card("rtx-5050-laptop", "GeForce RTX 5050 Laptop GPU", 8, "12.0"),
    _card("rtx-5060-laptop", "GeForce RTX 5060 Laptop GPU", 8, "12.0"),
    _card("rtx-5070-laptop", "GeForce RTX 5070 Laptop GPU", 8, "12.0"),
    _card("rtx-5070-ti-laptop", "GeForce RTX 5070 Ti Laptop GPU", 12, "12.0"),
    _card("rtx-5080-laptop", "GeForce RTX 5080 Laptop GPU", 16, "12.0"),
    _card("rtx-5090-laptop", "GeForce RTX 5090 Laptop GPU", 24, "12.0"),
)
_WORKSTATION = (
    _card("rtx-4000", "Quadro RTX 4000", 8, "7.5"),
    _card("rtx-5000", "Quadro RTX 5000", 16, "7.5"),
    _card("rtx-6000", "Quadro RTX 6000", 24, "7.5"),
    _card("rtx-8000", "Quadro RTX 8000", 48, "7.5"),
    _card("rtx-a2000", "NVIDIA RTX A2000", 6, "8.6"),
    _card("rtx-a2000-12gb", "NVIDIA RTX A2000 12GB", 12, "8.6"),
    _card("rtx-a4000", "NVIDIA RTX A4000", 16, "8.6"),
    _card("rtx-a4500", "NVIDIA RTX A4500", 20, "8.6"),
    _card("rtx-a5000", "NVIDIA RTX A5000", 24, "8.6"),
    _card("rtx-a5500", "NVIDIA RTX A5500", 24, "8.6"),
    _card("rtx-a6000", "NVIDIA RTX A6000", 48, "8.6"),
    _card("rtx-2000-ada", "NVIDIA RTX 2000 Ada Generation", 16, "8.9"),
    _card("rtx-4000-sff-ada", "NVIDIA RTX 4000 SFF Ada Generation", 20, "8.9"),
    _card("rtx-4000-ada", "NVIDIA RTX 4000 Ada Generation", 20, "8.9"),
    _card("rtx-4500-ada", "NVIDIA RTX 4500 Ada Generation", 24, "8.9"),
    _card("rtx-5000-ada", "NVIDIA RTX 5000 Ada Generation", 32, "8.9"),
    _card("rtx-6000-ada", "NVIDIA RTX 6000 Ada Generation", 48, "8.9"),
    _card("rtx-2000-ada-laptop", "NVIDIA RTX 2000 Ada Generation Laptop GPU", 8, "8.9"),
    _card("rtx-3000-ada-laptop", "NVIDIA RTX 3000 Ada Generation Laptop GPU", 8, "8.9"),
    _card("rtx-3500-ada-laptop", "NVIDIA RTX 3500 Ada Generation Laptop GPU", 12, "8.9"),
    _card("rtx-4000-ada-laptop", "NVIDIA RTX 4000 Ada Generation Laptop GPU", 12, "8.9"),
    _card("rtx-5000-ada-laptop", "NVIDIA RTX 5000 Ada Generation Laptop GPU", 16, "8.9"),
    _card("rtx-pro-4000", "NVIDIA RTX PRO 4000 Blackwell", 24, "12.0"),
    _card("rtx-pro-4500", "NVIDIA RTX PRO 4500 Blackwell", 32, "12.0"),
    _card("rtx-pro-5000", "NVIDIA RTX PRO 5000 Blackwell", 48, "12.0"),
    _card("rtx-pro-6000", "NVIDIA RTX PRO 6000 Blackwell", 96, "12.0"),
)
CARDS: tuple[Card, ...] = (*_DATACENTRE, *_GEFORCE_DESKTOP, *_GEFORCE_LAPTOP, *_WORKSTATION)
KEYS: tuple[str, ...] = tuple(c.key for c in CARDS)
# the same table by key: name -> (memory, (major, minor))
GPUS: dict[str, tuple[int, tuple[int, int]]] = {
    c.key: (c.memory, (c.capability.major, c.capability.minor)) for c in CARDS
}
BF16_MIN = (8, 0)  # vLLM refuses bfloat16 below compute capability 8.0


def card(name: str) -> Card:
    """A card from :data:`CARDS` by its key or name; BadInput naming the known ones."""
    key = _key(name)
    for known in CARDS:
        if key in (known.key, _key(known.name)):
            return known
    import difflib

    close = difflib.get_close_matches(key, KEYS, n=3)
    hint = f"Did you mean {' or '.join(close)}? " if close else ""
    raise BadInput(
        f"--gpu {name!r} is not a card envkit knows.",
        f"{hint}envkit knows {len(CARDS)} cards (GeForce RTX 20 to 50, desktop and laptop; "
        "RTX workstation; data centre), e.g. rtx-4060, rtx-4060-laptop, a100-80gb; "
        "nvidia-smi --query-gpu=name,compute_cap,memory.total --format=csv prints a card's "
        "name, compute capability and memory.",
    )


def _key(name: str) -> str:
    key = name.strip().lower().replace(" ", "-").replace("_", "-")
    for prefix in ("nvidia-", "geforce-", "tesla-", "quadro-"):
        key = key.removeprefix(prefix)
    return key
