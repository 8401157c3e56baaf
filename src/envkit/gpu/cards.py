"""The GPU side of ``envkit plan``'s input: sizes with units, cards envkit knows, compute
capabilities. Each is checked where it enters: BadInput naming the option and the value."""

from __future__ import annotations

import re
from decimal import Decimal

from envkit.errors import BadInput

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


# Common cards: memory and compute capability (facts from the vendor's tables). Names are
# matched lower-case with spaces and underscores as '-', "nvidia-" and "geforce-" dropped.
GPUS: dict[str, tuple[int, tuple[int, int]]] = {
    "rtx-2070": (8 * GIB, (7, 5)),
    "rtx-2080": (8 * GIB, (7, 5)),
    "rtx-2080-ti": (11 * GIB, (7, 5)),
    "t4": (16 * GIB, (7, 5)),
    "v100-16gb": (16 * GIB, (7, 0)),
    "v100-32gb": (32 * GIB, (7, 0)),
    "rtx-3060": (12 * GIB, (8, 6)),
    "rtx-3080": (10 * GIB, (8, 6)),
    "rtx-3090": (24 * GIB, (8, 6)),
    "a10": (24 * GIB, (8, 6)),
    "a10g": (24 * GIB, (8, 6)),
    "a100-40gb": (40 * GIB, (8, 0)),
    "a100-80gb": (80 * GIB, (8, 0)),
    "rtx-4060-ti-16gb": (16 * GIB, (8, 9)),
    "rtx-4090": (24 * GIB, (8, 9)),
    "l4": (24 * GIB, (8, 9)),
    "l40s": (48 * GIB, (8, 9)),
    "h100-80gb": (80 * GIB, (9, 0)),
    "h200": (141 * GIB, (9, 0)),
}
BF16_MIN = (8, 0)  # vLLM refuses bfloat16 below compute capability 8.0


def gpu(name: str) -> tuple[int, tuple[int, int]]:
    """A card from :data:`GPUS` by name; BadInput naming the known ones otherwise."""
    key = name.strip().lower().replace(" ", "-").replace("_", "-")
    for prefix in ("nvidia-", "geforce-"):
        key = key.removeprefix(prefix)
    if key in GPUS:
        return GPUS[key]
    import difflib

    close = difflib.get_close_matches(key, list(GPUS), n=1)
    hint = f"Did you mean {close[0]}? " if close else ""
    raise BadInput(
        f"--gpu {name!r} is not a card envkit knows.",
        f"{hint}Known: {', '.join(GPUS)}; or give --gpu-memory and --compute-capability.",
    )


def compute_capability(text: str) -> tuple[int, int]:
    """``7.5`` -> (7, 5); BadInput for anything else."""
    match = re.fullmatch(r"\s*([0-9]{1,2})\.([0-9])\s*", text)
    if not match:
        raise BadInput(
            f"--compute-capability {text!r} is not a compute capability such as 7.5 or 8.9.",
            "nvidia-smi --query-gpu=compute_cap --format=csv prints it.",
        )
    return int(match.group(1)), int(match.group(2))
