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


def _card(key: str, name: str, gib: int, capability: str) -> Card:
    return Card(key, name, gib * GIB, Capability.parse(capability))


# Common cards: memory and compute capability (NVIDIA's CUDA GPUs list and product pages).
# Keys and names are matched lower-case with spaces and underscores as '-', "nvidia-",
# "geforce-" and "tesla-" dropped.
CARDS: tuple[Card, ...] = (
    _card("p100", "Tesla P100 16GB", 16, "6.0"),
    _card("p40", "Tesla P40", 24, "6.1"),
    _card("v100-16gb", "Tesla V100 16GB", 16, "7.0"),
    _card("v100-32gb", "Tesla V100 32GB", 32, "7.0"),
    _card("rtx-2070", "GeForce RTX 2070", 8, "7.5"),
    _card("rtx-2080", "GeForce RTX 2080", 8, "7.5"),
    _card("rtx-2080-ti", "GeForce RTX 2080 Ti", 11, "7.5"),
    _card("t4", "Tesla T4", 16, "7.5"),
    _card("a100-40gb", "NVIDIA A100 40GB", 40, "8.0"),
    _card("a100-80gb", "NVIDIA A100 80GB", 80, "8.0"),
    _card("a30", "NVIDIA A30", 24, "8.0"),
    _card("rtx-3060", "GeForce RTX 3060", 12, "8.6"),
    _card("rtx-3080", "GeForce RTX 3080", 10, "8.6"),
    _card("rtx-3090", "GeForce RTX 3090", 24, "8.6"),
    _card("a10", "NVIDIA A10", 24, "8.6"),
    _card("a10g", "NVIDIA A10G", 24, "8.6"),
    _card("a40", "NVIDIA A40", 48, "8.6"),
    _card("rtx-a6000", "NVIDIA RTX A6000", 48, "8.6"),
    _card("rtx-4060-ti-16gb", "GeForce RTX 4060 Ti 16GB", 16, "8.9"),
    _card("rtx-4080", "GeForce RTX 4080", 16, "8.9"),
    _card("rtx-4090", "GeForce RTX 4090", 24, "8.9"),
    _card("rtx-6000-ada", "NVIDIA RTX 6000 Ada Generation", 48, "8.9"),
    _card("l4", "NVIDIA L4", 24, "8.9"),
    _card("l40", "NVIDIA L40", 48, "8.9"),
    _card("l40s", "NVIDIA L40S", 48, "8.9"),
    _card("h100-80gb", "NVIDIA H100 80GB", 80, "9.0"),
    _card("h100-nvl", "NVIDIA H100 NVL", 94, "9.0"),
    _card("h200", "NVIDIA H200", 141, "9.0"),
    _card("gh200", "NVIDIA GH200 96GB", 96, "9.0"),
    _card("b200", "NVIDIA B200", 180, "10.0"),
    _card("gb200", "NVIDIA GB200", 186, "10.0"),
    _card("b300", "NVIDIA B300", 288, "10.3"),
    _card("rtx-5060-ti-16gb", "GeForce RTX 5060 Ti 16GB", 16, "12.0"),
    _card("rtx-5070", "GeForce RTX 5070", 12, "12.0"),
    _card("rtx-5070-ti", "GeForce RTX 5070 Ti", 16, "12.0"),
    _card("rtx-5080", "GeForce RTX 5080", 16, "12.0"),
    _card("rtx-5090", "GeForce RTX 5090", 32, "12.0"),
    _card("rtx-pro-6000", "NVIDIA RTX PRO 6000 Blackwell", 96, "12.0"),
    _card("gb10", "NVIDIA GB10 (DGX Spark)", 128, "12.1"),
)
# plan's shape of the same table: name -> (memory, (major, minor))
GPUS: dict[str, tuple[int, tuple[int, int]]] = {
    c.key: (c.memory, (c.capability.major, c.capability.minor)) for c in CARDS
}
BF16_MIN = (8, 0)  # vLLM refuses bfloat16 below compute capability 8.0


def gpu(name: str) -> tuple[int, tuple[int, int]]:
    """A card from :data:`GPUS` by name; BadInput naming the known ones otherwise."""
    found = card(name)
    return found.memory, (found.capability.major, found.capability.minor)


def card(name: str) -> Card:
    """A card from :data:`CARDS` by its key or name; BadInput naming the known ones."""
    key = _key(name)
    for known in CARDS:
        if key in (known.key, _key(known.name)):
            return known
    import difflib

    close = difflib.get_close_matches(key, list(GPUS), n=1)
    hint = f"Did you mean {close[0]}? " if close else ""
    raise BadInput(
        f"--gpu {name!r} is not a card envkit knows.",
        f"{hint}Known: {', '.join(GPUS)}; or give --gpu-memory and --compute-capability.",
    )


def _key(name: str) -> str:
    key = name.strip().lower().replace(" ", "-").replace("_", "-")
    for prefix in ("nvidia-", "geforce-", "tesla-"):
        key = key.removeprefix(prefix)
    return key


def compute_capability(text: str) -> tuple[int, int]:
    """``7.5`` -> (7, 5); BadInput for anything else."""
    match = re.fullmatch(r"\s*([0-9]{1,2})\.([0-9])\s*", text)
    if not match:
        raise BadInput(
            f"--compute-capability {text!r} is not a compute capability such as 7.5 or 8.9.",
            "nvidia-smi --query-gpu=compute_cap --format=csv prints it.",
        )
    return int(match.group(1)), int(match.group(2))
